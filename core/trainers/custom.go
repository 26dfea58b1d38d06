package trainers

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/step"
)

// DefaultCustomFramework is what the framework-agnostic trainers discover when the step names no
// framework: the SDK's CustomTrainer default runtime is torch-distributed.
const DefaultCustomFramework = "torch"

// CustomTrainer is the SDK's framework-agnostic function trainer: it runs on any runtime that
// takes custom code, with the runtime's own entry point.
type CustomTrainer struct {
	Function
	framework string
}

func newCustom(framework string, raw json.RawMessage) (Trainer, field.ErrorList) {
	t := &CustomTrainer{framework: orDefault(framework)}
	if errs := step.DecodeStrict(raw, &t.Function, trainerPath); len(errs) > 0 {
		return nil, errs
	}
	errs := t.validate()
	return t, errs
}

func orDefault(fw string) string {
	if fw == "" {
		return DefaultCustomFramework
	}
	return fw
}

// Kind implements Trainer.
func (t *CustomTrainer) Kind() string { return "CustomTrainer" }

// Frameworks implements Trainer.
func (t *CustomTrainer) Frameworks() []string { return []string{t.framework} }

// ValidateRuntime implements Trainer: any custom-code runtime will do when named explicitly.
func (t *CustomTrainer) ValidateRuntime(r *runtimes.Runtime) *field.Error {
	return validateType(t, r, runtimes.CustomTrainer)
}

// Build implements Trainer.
func (t *CustomTrainer) Build(rt *runtimes.Runtime, rc *step.RuntimeConfig) (Parts, field.ErrorList) {
	return buildFunction(&t.Function, rt, rc, nil, nil, nil)
}
