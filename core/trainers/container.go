package trainers

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/step"
)

// ContainerTrainer is the SDK's CustomTrainerContainer: the training code is in an image.
type ContainerTrainer struct {
	Common
	Command        []string `json:"command,omitempty"`
	Args           []string `json:"args,omitempty"`
	NumProcPerNode *int32   `json:"numProcPerNode,omitempty"`
	framework      string
}

func newContainer(framework string, raw json.RawMessage) (Trainer, field.ErrorList) {
	t := &ContainerTrainer{framework: orDefault(framework)}
	if errs := step.DecodeStrict(raw, t, trainerPath); len(errs) > 0 {
		return nil, errs
	}
	errs := append(t.Common.validate(), validateProcs(t.NumProcPerNode)...)
	if t.Image == "" {
		errs = append(errs, field.Required(trainerPath.Child("image"), "the image that holds the training code, e.g. ghcr.io/org/train:1.0"))
	}
	for i, item := range append(append([]string{}, t.Command...), t.Args...) {
		if len(item) > MaxExecArg { // the installed Trainer's own limit is checked when planning
			p := trainerPath.Child("command").Index(i)
			if i >= len(t.Command) {
				p = trainerPath.Child("args").Index(i - len(t.Command))
			}
			errs = append(errs, field.Invalid(p, fmt.Sprintf("<%d characters>", len(item)), fmt.Sprintf("must be at most %d characters: Linux refuses a longer single argument (execve E2BIG)", MaxExecArg)))
		}
	}
	return t, errs
}

// Kind implements Trainer.
func (t *ContainerTrainer) Kind() string { return "CustomTrainerContainer" }

// Frameworks implements Trainer.
func (t *ContainerTrainer) Frameworks() []string { return []string{t.framework} }

// ValidateRuntime implements Trainer.
func (t *ContainerTrainer) ValidateRuntime(r *runtimes.Runtime) *field.Error {
	return validateType(t, r, runtimes.CustomTrainer)
}

// Build implements Trainer.
func (t *ContainerTrainer) Build(rt *runtimes.Runtime, rc *step.RuntimeConfig) (Parts, field.ErrorList) {
	env, envPath := mergeEnv(t.Env, rc)
	if errs := reservedEnv(env, envPath, rt.Policy); len(errs) > 0 {
		return Parts{}, errs
	}
	var p Parts
	t.Common.apply(&p, env)
	p.Command, p.Args, p.NumProcPerNode = t.Command, t.Args, t.NumProcPerNode
	return p, nil
}
