package trainers

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/step"
)

func requirePolicy(t runtimes.Trainer, r *runtimes.Runtime, want runtimes.Policy, launcher string) *field.Error {
	if r.Policy == want {
		return nil
	}
	return field.Invalid(field.NewPath("runtime", "name"), r.Name,
		fmt.Sprintf("%s starts the function with %s, which needs a runtime with mlPolicy.%s; runtime '%s' has mlPolicy.%s", t.Kind(), launcher, want, r.Name, r.Policy))
}

// validateFramework is BaseTrainer.validate_runtime, with the SDK's message.
func validateFramework(t runtimes.Trainer, r *runtimes.Runtime) *field.Error {
	if runtimes.Has(t, r.Framework) {
		return nil
	}
	return field.Invalid(field.NewPath("runtime", "name"), r.Name,
		fmt.Sprintf("%s supports frameworks %v, but runtime '%s' has framework '%s'", t.Kind(), t.Frameworks(), r.Name, r.Framework))
}

// validateType is FuncTrainer/ConfigTrainer.validate_runtime, with the KEP's message.
func validateType(t runtimes.Trainer, r *runtimes.Runtime, want runtimes.TrainerType) *field.Error {
	if r.Type == want {
		return nil
	}
	return field.Invalid(field.NewPath("runtime", "name"), r.Name,
		fmt.Sprintf("%s requires a runtime with trainer_type=%s, but runtime '%s' has trainer_type=%s", t.Kind(), want, r.Name, r.Type))
}

// torchReserved are the env names the Trainer's torch plugin sets; its webhook rejects them.
var torchReserved = []string{"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"}

func reservedEnv(env step.Env, p *field.Path, policy runtimes.Policy) field.ErrorList {
	var errs field.ErrorList
	for _, n := range InjectedEnv(policy) {
		if env.Has(n) {
			errs = append(errs, ReservedEnvError(p.Key(n), policy))
		}
	}
	return errs
}

// ReservedEnvError is the one refusal of a name in InjectedEnv, whichever env source set it: the
// Trainer's webhook would refuse the TrainJob (naming spec.trainer.env, where every source lands)
// or the controller would overwrite the value.
func ReservedEnvError(p *field.Path, policy runtimes.Policy) *field.Error {
	return field.Forbidden(p, fmt.Sprintf("set by the Trainer controller on runtimes with mlPolicy.%s; trainstep and the Trainer derive it from trainer.numNodes and trainer.numProcPerNode, so remove it", policy))
}
