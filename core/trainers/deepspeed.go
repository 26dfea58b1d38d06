package trainers

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/step"
)

// DeepSpeedTrainer (KEP-285 R2) runs a DeepSpeed function on a deepspeed runtime (mpirun), or on a
// torch runtime (torchrun) when the cluster has no deepspeed one.
type DeepSpeedTrainer struct {
	Function
	// DeepspeedConfig (an object, or a path inside the image) reaches the function as the env
	// DEEPSPEED_CONFIG (JSON for an object): the Trainer has no field for it.
	DeepspeedConfig any    `json:"deepspeedConfig,omitempty"`
	NumProcPerNode  *int32 `json:"numProcPerNode,omitempty"`
}

// DeepSpeedConfigEnv carries DeepSpeedTrainer.deepspeedConfig to the function.
const DeepSpeedConfigEnv = "DEEPSPEED_CONFIG"

func newDeepSpeed(_ string, raw json.RawMessage) (Trainer, field.ErrorList) {
	t := &DeepSpeedTrainer{}
	if errs := step.DecodeStrict(raw, t, trainerPath); len(errs) > 0 {
		return nil, errs
	}
	errs := append(t.validate(), validateProcs(t.NumProcPerNode)...)
	switch t.DeepspeedConfig.(type) {
	case nil, string, map[string]any:
	default:
		errs = append(errs, field.Invalid(trainerPath.Child("deepspeedConfig"), t.DeepspeedConfig, "must be an object (the DeepSpeed config) or a path to a JSON file in the image"))
	}
	return t, errs
}

// Kind implements Trainer.
func (t *DeepSpeedTrainer) Kind() string { return "DeepSpeedTrainer" }

// Frameworks implements Trainer.
func (t *DeepSpeedTrainer) Frameworks() []string { return []string{"deepspeed", "torch"} }

// ValidateRuntime implements Trainer.
func (t *DeepSpeedTrainer) ValidateRuntime(r *runtimes.Runtime) *field.Error {
	if err := validateFramework(t, r); err != nil {
		return err
	}
	if err := validateType(t, r, runtimes.CustomTrainer); err != nil {
		return err
	}
	if r.Policy != runtimes.PolicyMPI && r.Policy != runtimes.PolicyTorch {
		return requirePolicy(t, r, runtimes.PolicyMPI, "mpirun or torchrun")
	}
	return nil
}

// Build implements Trainer.
func (t *DeepSpeedTrainer) Build(rt *runtimes.Runtime, rc *step.RuntimeConfig) (Parts, field.ErrorList) {
	fw := map[string]string{}
	switch c := t.DeepspeedConfig.(type) {
	case string:
		fw[DeepSpeedConfigEnv] = c
	case map[string]any:
		b, err := json.Marshal(c)
		if err != nil {
			return Parts{}, field.ErrorList{field.Invalid(trainerPath.Child("deepspeedConfig"), "", err.Error())}
		}
		fw[DeepSpeedConfigEnv] = string(b)
	}
	return buildFunction(&t.Function, rt, rc, fw, map[string]*field.Path{DeepSpeedConfigEnv: trainerPath.Child("deepspeedConfig")}, t.NumProcPerNode)
}
