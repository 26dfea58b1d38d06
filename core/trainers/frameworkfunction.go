package trainers

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/step"
)

// frameworkFunction is a function trainer with no fields of its own, bound to one framework:
// JAXTrainer and XGBoostTrainer. The Trainer (v2.2+) injects JAX_* / DMLC_* env on their runtimes.
type frameworkFunction struct {
	Function
	kind      string
	framework string
}

func newFrameworkFunction(kind, framework string) Factory {
	return func(_ string, raw json.RawMessage) (Trainer, field.ErrorList) {
		t := &frameworkFunction{kind: kind, framework: framework}
		if errs := step.DecodeStrict(raw, &t.Function, trainerPath); len(errs) > 0 {
			return nil, errs
		}
		errs := t.validate()
		return t, errs
	}
}

func (t *frameworkFunction) Kind() string         { return t.kind }
func (t *frameworkFunction) Frameworks() []string { return []string{t.framework} }

func (t *frameworkFunction) ValidateRuntime(r *runtimes.Runtime) *field.Error {
	if err := validateFramework(t, r); err != nil {
		return err
	}
	return validateType(t, r, runtimes.CustomTrainer)
}

func (t *frameworkFunction) Build(rt *runtimes.Runtime, rc *step.RuntimeConfig) (Parts, field.ErrorList) {
	return buildFunction(&t.Function, rt, rc, nil, nil, nil)
}
