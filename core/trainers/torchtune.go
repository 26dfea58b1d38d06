package trainers

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/step"
)

// TorchTuneTrainer is a config trainer (KEP-285 ConfigTrainer) for the built-in torchtune
// runtimes: the recipe is the runtime's, the step only overrides config keys.
type TorchTuneTrainer struct {
	NumNodes         *int32         `json:"numNodes,omitempty"`
	ResourcesPerNode map[string]any `json:"resourcesPerNode,omitempty"`
	Dtype            string         `json:"dtype,omitempty"`
	BatchSize        *int32         `json:"batchSize,omitempty"`
	Epochs           *int32         `json:"epochs,omitempty"`
	Loss             string         `json:"loss,omitempty"`
	// Config holds any other torchtune config override, key=value.
	Config map[string]any `json:"config,omitempty"`
}

func newTorchTune(_ string, raw json.RawMessage) (Trainer, field.ErrorList) {
	t := &TorchTuneTrainer{}
	if errs := step.DecodeStrict(raw, t, trainerPath); len(errs) > 0 {
		return nil, errs
	}
	c := Common{NumNodes: t.NumNodes, ResourcesPerNode: t.ResourcesPerNode}
	errs := c.validate()
	if t.Dtype != "" && t.Dtype != "bf16" && t.Dtype != "fp32" {
		errs = append(errs, field.NotSupported(trainerPath.Child("dtype"), t.Dtype, []string{"bf16", "fp32"}))
	}
	for _, pos := range []struct {
		v *int32
		n string
	}{{t.BatchSize, "batchSize"}, {t.Epochs, "epochs"}} {
		if pos.v != nil && *pos.v < 1 {
			errs = append(errs, field.Invalid(trainerPath.Child(pos.n), *pos.v, "must be 1 or more"))
		}
	}
	for k, v := range t.Config {
		if _, nested := v.(map[string]any); nested {
			errs = append(errs, field.Invalid(trainerPath.Child("config").Key(k), v, "must be a value or a list; write nested keys with dots (optimizer.lr: 0.001)"))
		}
		if strings.ContainsAny(k, "= \n") || k == "" {
			errs = append(errs, field.Invalid(trainerPath.Child("config").Key(k), k, "must be a torchtune config key such as optimizer.lr"))
		}
	}
	return t, errs
}

// Kind implements Trainer.
func (t *TorchTuneTrainer) Kind() string { return "TorchTuneTrainer" }

// Frameworks implements Trainer.
func (t *TorchTuneTrainer) Frameworks() []string { return []string{runtimes.TorchTune} }

// ValidateRuntime implements Trainer.
func (t *TorchTuneTrainer) ValidateRuntime(r *runtimes.Runtime) *field.Error {
	if err := validateFramework(t, r); err != nil {
		return err
	}
	return validateType(t, r, runtimes.BuiltinTrainer)
}

// Build implements Trainer: the runtime's command (recipe and its defaults) followed by the
// overrides, which torchtune applies last-wins.
func (t *TorchTuneTrainer) Build(rt *runtimes.Runtime, _ *step.RuntimeConfig) (Parts, field.ErrorList) {
	if len(rt.Command) == 0 {
		return Parts{}, field.ErrorList{field.Invalid(field.NewPath("runtime", "name"), rt.Name, "the runtime's node container has no command (tune run <recipe> …) to add overrides to")}
	}
	over := map[string]any{}
	for k, v := range t.Config {
		over[k] = v
	}
	if t.Dtype != "" {
		over["dtype"] = t.Dtype
	}
	if t.BatchSize != nil {
		over["batch_size"] = *t.BatchSize
	}
	if t.Epochs != nil {
		over["epochs"] = *t.Epochs
	}
	if t.Loss != "" {
		over["loss"] = t.Loss
	}
	c := Common{NumNodes: t.NumNodes, ResourcesPerNode: t.ResourcesPerNode}
	var p Parts
	c.apply(&p, nil)
	p.Command = append(append([]string{}, rt.Command...), overrides(over)...)
	return p, nil
}

func overrides(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k+"="+configValue(m[k]))
	}
	return out
}

func configValue(v any) string {
	switch x := v.(type) {
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = configValue(e)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case nil:
		return "null"
	}
	return fmt.Sprint(v)
}
