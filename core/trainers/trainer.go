// Package trainers is KEP-285's trainer hierarchy in Go: each trainer declares the frameworks it
// runs on (in preference order), checks a runtime, and turns its fields into the parts of a
// TrainJob's spec.trainer. Trainers are registered in a Registry, so a new one needs no change here.
package trainers

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/step"
)

// Trainer is KEP-285's BaseTrainer.
type Trainer interface {
	runtimes.Trainer
	// Build renders the trainer for the chosen runtime. rc is the step's RuntimeConfig (may be
	// nil); its set fields replace the trainer's own.
	Build(rt *runtimes.Runtime, rc *step.RuntimeConfig) (Parts, field.ErrorList)
}

// Parts is what a trainer contributes to spec.trainer (the fields stable from Trainer v2.0 to v2.3,
// plus numProcPerNode whose integer form is accepted by all of them).
type Parts struct {
	Image          string
	Command        []string
	Args           []string
	Env            []corev1.EnvVar
	NumNodes       *int32
	Resources      *corev1.ResourceRequirements
	NumProcPerNode *int32
}

var trainerPath = field.NewPath("trainer")

// Common holds the fields every trainer has (BaseTrainer's num_nodes, resources_per_node, image,
// and CustomTrainer's env).
type Common struct {
	NumNodes         *int32         `json:"numNodes,omitempty"`
	ResourcesPerNode map[string]any `json:"resourcesPerNode,omitempty"`
	Image            string         `json:"image,omitempty"`
	Env              step.Env       `json:"env,omitzero"`
}

func (c *Common) validate() field.ErrorList {
	var errs field.ErrorList
	if c.NumNodes != nil && *c.NumNodes < 1 {
		errs = append(errs, field.Invalid(trainerPath.Child("numNodes"), *c.NumNodes, "must be 1 or more"))
	}
	if _, e := resources(c.ResourcesPerNode); len(e) > 0 {
		errs = append(errs, e...)
	}
	if c.Image != "" && strings.ContainsAny(c.Image, " \t\n") {
		errs = append(errs, field.Invalid(trainerPath.Child("image"), c.Image, "must be an image reference such as ghcr.io/org/train:1.0"))
	}
	errs = append(errs, step.ValidateEnv(c.Env, trainerPath.Child("env"))...)
	return errs
}

// apply fills the parts every trainer shares. env is the final environment, in order.
func (c *Common) apply(p *Parts, env step.Env) {
	p.Image = c.Image
	p.NumNodes = c.NumNodes
	p.Resources, _ = resources(c.ResourcesPerNode)
	p.Env = envList(env)
}

// resources maps the SDK's resources_per_node to identical requests and limits, with its aliases
// (gpu → nvidia.com/gpu, storage → ephemeral-storage, mig-<profile> → nvidia.com/mig-<profile>),
// matched in any case as the SDK matches them. Any other name is kept exactly as written:
// extended resources are case-sensitive (huawei.com/Ascend910 is not huawei.com/ascend910, and a
// pod asking for the latter is never scheduled where only the former is advertised).
func resources(in map[string]any) (*corev1.ResourceRequirements, field.ErrorList) {
	if len(in) == 0 {
		return nil, nil
	}
	p := trainerPath.Child("resourcesPerNode")
	var errs field.ErrorList
	list := corev1.ResourceList{}
	mig := 0
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		name, lower := k, strings.ToLower(k)
		switch {
		case lower == "cpu", lower == "memory":
			name = lower
		case lower == "gpu":
			name = "nvidia.com/gpu"
		case lower == "storage":
			name = "ephemeral-storage"
		case strings.HasPrefix(lower, "mig-"):
			name = "nvidia.com/" + lower
		}
		if msgs := validation.IsQualifiedName(name); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p.Key(k), k, "must be cpu, memory, gpu, storage, mig-<profile> or a resource name such as example.com/device: "+strings.Join(msgs, "; ")))
			continue
		}
		if strings.HasPrefix(name, "nvidia.com/mig-") {
			mig++
		}
		var text string
		switch v := in[k].(type) {
		case json.Number:
			text = v.String()
		case string:
			text = v
		default:
			errs = append(errs, field.Invalid(p.Key(k), in[k], "must be a quantity such as 2, 500m or 16Gi"))
			continue
		}
		q, err := resource.ParseQuantity(text)
		if err != nil || q.Sign() < 0 {
			errs = append(errs, field.Invalid(p.Key(k), text, "must be a quantity such as 2, 500m or 16Gi"))
			continue
		}
		list[corev1.ResourceName(name)] = q
	}
	if _, gpu := list["nvidia.com/gpu"]; mig > 1 || (mig == 1 && gpu) {
		errs = append(errs, field.Invalid(p, keys, "ask for one kind of GPU: either gpu or a single mig-<profile>"))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return &corev1.ResourceRequirements{Requests: list.DeepCopy(), Limits: list}, nil
}

// envList keeps the order: Kubernetes expands $(VAR) only from earlier entries.
func envList(env step.Env) []corev1.EnvVar {
	if len(env) == 0 {
		return nil
	}
	out := make([]corev1.EnvVar, len(env))
	for i, e := range env {
		out[i] = corev1.EnvVar{Name: e.Name, Value: e.Value}
	}
	return out
}

// mergeEnv is KEP-285's field-level merge: a set runtimeConfig.env replaces the trainer's env.
func mergeEnv(own step.Env, rc *step.RuntimeConfig) (step.Env, *field.Path) {
	if rc != nil && rc.Env != nil {
		return slices.Clone(rc.Env), field.NewPath("runtimeConfig", "env")
	}
	return slices.Clone(own), trainerPath.Child("env")
}
