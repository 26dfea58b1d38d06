package trainers

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/step"
)

// TorchTrainer runs a function with torchrun on a runtime with mlPolicy.torch.
type TorchTrainer struct {
	Function
	// MaxRestarts and MonitorInterval are torchrun options. They travel as PET_MAX_RESTARTS /
	// PET_MONITOR_INTERVAL env, which torchrun reads: trainer.args after `bash -c` would be lost.
	MaxRestarts     *int32       `json:"maxRestarts,omitempty"`
	MonitorInterval *json.Number `json:"monitorInterval,omitempty"`
	// NumProcPerNode goes to spec.trainer.numProcPerNode (the Trainer sets PET_NPROC_PER_NODE).
	NumProcPerNode *int32 `json:"numProcPerNode,omitempty"`
}

func newTorch(_ string, raw json.RawMessage) (Trainer, field.ErrorList) {
	t := &TorchTrainer{}
	if errs := step.DecodeStrict(raw, t, trainerPath); len(errs) > 0 {
		return nil, errs
	}
	errs := t.validate()
	if t.MaxRestarts != nil && *t.MaxRestarts < 0 {
		errs = append(errs, field.Invalid(trainerPath.Child("maxRestarts"), *t.MaxRestarts, "must be 0 or more"))
	}
	if t.MonitorInterval != nil {
		if v, err := t.MonitorInterval.Float64(); err != nil || v <= 0 {
			errs = append(errs, field.Invalid(trainerPath.Child("monitorInterval"), t.MonitorInterval.String(), "must be a positive number of seconds"))
		}
	}
	errs = append(errs, validateProcs(t.NumProcPerNode)...)
	return t, errs
}

func validateProcs(n *int32) field.ErrorList {
	if n != nil && *n < 1 {
		return field.ErrorList{field.Invalid(trainerPath.Child("numProcPerNode"), *n, "must be 1 or more")}
	}
	return nil
}

// Kind implements Trainer.
func (t *TorchTrainer) Kind() string { return "TorchTrainer" }

// Frameworks implements Trainer.
func (t *TorchTrainer) Frameworks() []string { return []string{"torch"} }

// ValidateRuntime implements Trainer.
func (t *TorchTrainer) ValidateRuntime(r *runtimes.Runtime) *field.Error {
	if err := validateFramework(t, r); err != nil {
		return err
	}
	if err := validateType(t, r, runtimes.CustomTrainer); err != nil {
		return err
	}
	return requirePolicy(t, r, runtimes.PolicyTorch, "torchrun")
}

// Build implements Trainer.
func (t *TorchTrainer) Build(rt *runtimes.Runtime, rc *step.RuntimeConfig) (Parts, field.ErrorList) {
	fw := map[string]string{}
	from := map[string]*field.Path{}
	if t.MaxRestarts != nil {
		fw["PET_MAX_RESTARTS"] = fmt.Sprint(*t.MaxRestarts)
		from["PET_MAX_RESTARTS"] = trainerPath.Child("maxRestarts")
	}
	if t.MonitorInterval != nil {
		fw["PET_MONITOR_INTERVAL"] = t.MonitorInterval.String()
		from["PET_MONITOR_INTERVAL"] = trainerPath.Child("monitorInterval")
	}
	return buildFunction(&t.Function, rt, rc, fw, from, t.NumProcPerNode)
}
