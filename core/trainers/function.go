package trainers

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/core/message"
	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/step"
)

// Function holds the fields of every function trainer (KEP-285's FuncTrainer plus the SDK's
// CustomTrainer runtime fields): Python source, the function to call and its arguments.
type Function struct {
	Common
	// Func is the Python source that defines the training function.
	Func string `json:"func"`
	// FuncName is the function to call; optional when Func defines exactly one top-level function.
	FuncName string `json:"funcName,omitempty"`
	// FuncArgs are passed as keyword arguments, rendered as Python literals.
	FuncArgs          step.Object `json:"funcArgs,omitempty"`
	PackagesToInstall []string    `json:"packagesToInstall,omitempty"`
	PipIndexUrls      []string    `json:"pipIndexUrls,omitempty"`
}

func (f *Function) validate() field.ErrorList {
	errs := f.Common.validate()
	p := trainerPath
	errs = append(errs, step.ValidatePackages(f.PackagesToInstall, p.Child("packagesToInstall"))...)
	errs = append(errs, step.ValidateIndexURLs(f.PipIndexUrls, p.Child("pipIndexUrls"))...)
	if strings.TrimSpace(f.Func) == "" {
		return append(errs, field.Required(p.Child("func"), "the Python source of the training function, e.g. \"def train(lr):\\n    ...\""))
	}
	defs := TopLevelFunctions(dedent(f.Func))
	switch {
	case f.FuncName != "" && !slices.Contains(defs, f.FuncName):
		errs = append(errs, field.Invalid(p.Child("funcName"), f.FuncName,
			fmt.Sprintf("trainer.func defines no top-level function of that name (it defines: %s)", strings.Join(defs, ", "))))
	case f.FuncName == "" && len(defs) == 0:
		errs = append(errs, field.Invalid(p.Child("func"), message.FirstLine(f.Func), "defines no top-level function (def name(...):)"))
	case f.FuncName == "" && len(defs) > 1:
		errs = append(errs, field.Required(p.Child("funcName"), fmt.Sprintf("trainer.func defines %s; name the one to call", strings.Join(defs, ", "))))
	case f.FuncName == "":
		f.FuncName = defs[0]
	}
	if _, err := PyLiteral(f.FuncArgs); err != nil {
		errs = append(errs, field.Invalid(p.Child("funcArgs"), "", err.Error()))
	}
	return errs
}

// build renders the function for the runtime. env is the merged environment, already holding the
// trainer's framework env.
func (f *Function) build(rt *runtimes.Runtime, rc *step.RuntimeConfig, env step.Env) (Parts, field.ErrorList) {
	pkgs, urls := f.PackagesToInstall, f.PipIndexUrls
	if rc != nil && rc.PackagesToInstall != nil {
		pkgs = rc.PackagesToInstall
	}
	if rc != nil && rc.PipIndexUrls != nil {
		urls = rc.PipIndexUrls
	}
	s := Script{Source: f.Func, FuncName: f.FuncName, FuncArgs: f.FuncArgs, Packages: pkgs, IndexURLs: urls, Policy: rt.Policy, MaxItem: rt.MaxCommandItem,
		Containers: rt.TrainerPodContainers()}
	cmd, err := s.Command()
	if err != nil {
		return Parts{}, field.ErrorList{field.Invalid(trainerPath.Child("func"), message.FirstLine(f.Func), err.Error())}
	}
	var p Parts
	f.Common.apply(&p, env)
	p.Command = cmd
	return p, nil
}

// envWith merges the trainer's env with runtimeConfig and adds framework env the user did not set
// (a user value for the same name is a conflict, reported on the user's field). The user's
// entries keep their order; the framework's follow, sorted by name.
func envWith(own step.Env, rc *step.RuntimeConfig, framework map[string]string, from map[string]*field.Path) (step.Env, *field.Path, field.ErrorList) {
	env, p := mergeEnv(own, rc)
	var errs field.ErrorList
	names := make([]string, 0, len(framework))
	for k := range framework {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if v, taken := env.Get(k); taken {
			errs = append(errs, field.Invalid(p.Key(k), v, fmt.Sprintf("conflicts with %s, which sets it; keep one", from[k])))
			continue
		}
		env = append(env, step.EnvVar{Name: k, Value: framework[k]})
	}
	return env, p, errs
}

// buildFunction is the shared tail of every function trainer: env merge, reserved names, script.
func buildFunction(f *Function, rt *runtimes.Runtime, rc *step.RuntimeConfig, fw map[string]string, from map[string]*field.Path, procs *int32) (Parts, field.ErrorList) {
	env, envPath, errs := envWith(f.Env, rc, fw, from)
	errs = append(errs, reservedEnv(env, envPath, rt.Policy)...)
	if len(errs) > 0 {
		return Parts{}, errs
	}
	p, errs := f.build(rt, rc, env)
	p.NumProcPerNode = procs
	return p, errs
}

// InjectedEnv is the env the Trainer controller sets for a policy; a user value would be rejected
// (torch, xgboost and mpi, by the webhook) or silently overwritten (jax). Every env source of a
// step (trainer.env, runtimeConfig.env, pod.env) is checked against it by ReservedEnvError.
func InjectedEnv(p runtimes.Policy) []string {
	switch p {
	case runtimes.PolicyTorch:
		return torchReserved
	case runtimes.PolicyJAX:
		return []string{"JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "JAX_COORDINATOR_ADDRESS"}
	case runtimes.PolicyXGBoost:
		return []string{"DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER"}
	case runtimes.PolicyMPI:
		// constants.MPIReservedEnvNames: the MPI plugin's webhook refuses them.
		return []string{"OMPI_MCA_orte_default_hostfile", "OMPI_MCA_plm_rsh_args", "OMPI_MCA_orte_keep_fqdn_hostnames", "OMPI_MCA_orte_set_default_slots"}
	}
	return nil
}
