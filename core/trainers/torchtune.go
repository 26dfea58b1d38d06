package trainers

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/step"
)

// TorchTuneTrainer is a config trainer (KEP-285 ConfigTrainer) for the built-in torchtune
// runtimes: the recipe is the runtime's, the step only overrides config keys. Its fields are the
// Kubeflow SDK's TorchTuneConfig in camelCase (num_nodes → numNodes, peft_config → peftConfig, …),
// mapped to the same torchtune overrides the SDK makes (tuneArgs); config reaches any other key.
type TorchTuneTrainer struct {
	NumNodes         *int32         `json:"numNodes,omitempty"`
	ResourcesPerNode map[string]any `json:"resourcesPerNode,omitempty"`
	Dtype            string         `json:"dtype,omitempty"`
	BatchSize        *int32         `json:"batchSize,omitempty"`
	Epochs           *int32         `json:"epochs,omitempty"`
	Loss             string         `json:"loss,omitempty"`
	// PeftConfig is the SDK's peft_config (LoraConfig): LoRA, QLoRA with quantizeBase, DoRA with
	// useDora. Its presence makes the Trainer pick a LoRA recipe (model.lora_attn_modules).
	PeftConfig *LoraConfig `json:"peftConfig,omitempty"`
	// DatasetPreprocessConfig is the SDK's dataset_preprocess_config (TorchTuneInstructDataset):
	// the dataset is torchtune's instruct_dataset, read as these fields say.
	DatasetPreprocessConfig *InstructDataset `json:"datasetPreprocessConfig,omitempty"`
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
	if t.Dtype != "" && !slices.Contains(tuneDtypes, t.Dtype) {
		errs = append(errs, field.NotSupported(trainerPath.Child("dtype"), t.Dtype, tuneDtypes))
	}
	errs = append(errs, atLeastOne(trainerPath, "must be 1 or more", optionalInt{t.BatchSize, "batchSize"}, optionalInt{t.Epochs, "epochs"})...)
	errs = append(errs, t.PeftConfig.validate(trainerPath.Child("peftConfig"))...)
	errs = append(errs, t.DatasetPreprocessConfig.validate(trainerPath.Child("datasetPreprocessConfig"))...)
	for k, v := range t.Config {
		if _, nested := v.(map[string]any); nested {
			errs = append(errs, field.Invalid(trainerPath.Child("config").Key(k), v, "must be a value or a list; write nested keys with dots (optimizer.lr: 0.001)"))
		}
		if strings.ContainsAny(k, "= \n") || k == "" {
			errs = append(errs, field.Invalid(trainerPath.Child("config").Key(k), k, "must be a torchtune config key such as optimizer.lr"))
		}
	}
	errs = append(errs, t.configConflicts()...)
	return t, errs
}

// tuneDtypes are the SDK's DataType values.
var tuneDtypes = []string{"bf16", "fp32"}

// configConflicts refuses a config key that a named field sets too: torchtune would keep
// whichever came last, and which one the user meant is theirs to say.
func (t *TorchTuneTrainer) configConflicts() field.ErrorList {
	var errs field.ErrorList
	for _, a := range t.tuneArgs() {
		if _, twice := t.Config[a.key]; twice {
			errs = append(errs, field.Duplicate(trainerPath.Child("config").Key(a.key),
				fmt.Sprintf("%s is also set by %s; set it in one place", a.key, a.from)))
		}
	}
	return errs
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

// TuneEntrypoint is the command by which the Trainer (torch plugin, v2.0+) knows a TrainJob is
// torchtune: only then does it pick the recipe and config from the node count, GPUs and LoRA or
// QLoRA keys, point --rdzv_endpoint at node 0, copy the runtime's immutable paths, and run its
// torchtune webhook checks. trainstep's overrides go in spec.trainer.args, as the SDK's do.
var TuneEntrypoint = []string{"tune", "run"}

// Config keys the Trainer manages for the runtime (constants.TorchTuneImmutableConfigs) and
// refuses in args.
var (
	tuneImmutable = []string{"output_dir", "tokenizer.path", "checkpointer.checkpoint_dir", "tokenizer.merges_file"}
	// tuneMultiNode are the models the Trainer (v2.3) lets run on more than one node.
	tuneMultiNode = []string{"llama3_3/70B"}
)

// Build implements Trainer: command [tune, run] so the Trainer applies its torchtune handling,
// and args = the runtime's own config overrides (its dataset settings, say) followed by the
// step's (the named fields in the SDK's order, then config's keys sorted), which torchtune
// applies last-wins.
func (t *TorchTuneTrainer) Build(rt *runtimes.Runtime, _ *step.RuntimeConfig) (Parts, field.ErrorList) {
	if len(rt.Command) < 2 || rt.Command[0] != TuneEntrypoint[0] || rt.Command[1] != TuneEntrypoint[1] {
		return Parts{}, field.ErrorList{field.Invalid(field.NewPath("runtime", "name"), rt.Name,
			fmt.Sprintf("TorchTuneTrainer needs a runtime whose node container runs `tune run …`; runtime %s runs %q", rt.Name, strings.Join(rt.Command, " ")))}
	}
	args := append(tuneArgStrings(t.tuneArgs()), overrides(t.Config)...)
	if errs := t.check(rt, args); len(errs) > 0 {
		return Parts{}, errs
	}
	c := Common{NumNodes: t.NumNodes, ResourcesPerNode: t.ResourcesPerNode}
	var p Parts
	c.apply(&p, nil)
	p.Command = append([]string{}, TuneEntrypoint...)
	p.Args = append(runtimeOverrides(rt.Command), args...)
	return p, nil
}

// check refuses, before anything is created, what the Trainer's torchtune webhook refuses.
func (t *TorchTuneTrainer) check(rt *runtimes.Runtime, args []string) field.ErrorList {
	var errs field.ErrorList
	for _, k := range tuneImmutable {
		if v, ok := t.Config[k]; ok {
			errs = append(errs, field.Invalid(trainerPath.Child("config").Key(k), v,
				fmt.Sprintf("the Trainer sets %s from runtime %s and refuses an override; write to the paths the runtime mounts instead", k, rt.Name)))
		}
	}
	nodes := rt.NumNodes
	if t.NumNodes != nil {
		nodes = *t.NumNodes
	}
	if nodes <= 1 {
		return errs
	}
	if model := tuneModel(rt.Name); !slices.Contains(tuneMultiNode, model) {
		errs = append(errs, field.Invalid(trainerPath.Child("numNodes"), nodes,
			fmt.Sprintf("must be 1 for model %s of runtime %s: the Trainer runs only %s on several nodes", model, rt.Name, strings.Join(tuneMultiNode, ", "))))
	}
	if lora, qlora := tuneLoRA(args); lora || qlora {
		errs = append(errs, field.Invalid(trainerPath.Child("numNodes"), nodes,
			"LoRA and QLoRA (trainer.peftConfig, or config model.lora_attn_modules / model.quantize_base) run on one node only in torchtune; set numNodes: 1"))
	}
	return errs
}

// tuneLoRA reads the args as the Trainer does: LoRA when model.lora_attn_modules is set, QLoRA
// when model.quantize_base is true and model.use_dora is not.
func tuneLoRA(args []string) (lora, qlora bool) {
	enabled := func(key string) bool {
		for _, a := range args {
			k, v, ok := strings.Cut(a, "=")
			if ok && strings.Contains(k, key) && strings.EqualFold(strings.TrimSpace(v), "true") {
				return true
			}
		}
		return false
	}
	for _, a := range args {
		if strings.Contains(a, "model.lora_attn_modules") {
			lora = true
		}
	}
	return lora, !enabled("model.use_dora") && enabled("model.quantize_base")
}

// TuneCommand is the command the Trainer (v2.3, torch plugin) makes of a TrainJob whose command
// is [tune, run]: the rendezvous on node 0 when there is more than one process, the recipe and
// config it picks from the node count, processes (nil: auto), GPUs per node and LoRA/QLoRA
// args, the runtime's immutable paths, then the args. The local backend runs the same.
func TuneCommand(runtimeName string, runtimeCommand []string, nodes int32, procs *int32, gpus int, rdzv string, args []string) []string {
	lora, qlora := tuneLoRA(args)
	recipe, suffix := "full_finetune_distributed", "_full"
	single := procs != nil && *procs == 1 || procs == nil && gpus == 1
	switch {
	case nodes == 1 && single && qlora:
		recipe, suffix = "lora_finetune_single_device", "_qlora_single_device"
	case nodes == 1 && single && lora:
		recipe, suffix = "lora_finetune_single_device", "_lora_single_device"
	case nodes == 1 && single:
		recipe, suffix = "full_finetune_single_device", "_full_single_device"
	case nodes == 1 && qlora:
		recipe, suffix = "lora_finetune_distributed", "_qlora"
	case nodes == 1 && lora:
		recipe, suffix = "lora_finetune_distributed", "_lora"
	case nodes > 1:
		suffix = "_full_multinode"
	}
	cmd := append([]string{}, TuneEntrypoint...)
	if nodes > 1 || procs != nil && *procs > 1 || procs == nil && gpus > 1 {
		cmd = append(cmd, "--rdzv_endpoint="+rdzv)
	}
	cmd = append(cmd, recipe, "--config", tuneModel(runtimeName)+suffix)
	for _, c := range runtimeCommand {
		if k, _, ok := strings.Cut(c, "="); ok && slices.Contains(tuneImmutable, k) {
			cmd = append(cmd, c)
		}
	}
	return append(cmd, args...)
}

// tuneModel is the Trainer's reading of a torchtune runtime's name: torchtune-llama3.2-1b →
// llama3_2/1B.
func tuneModel(runtime string) string {
	f := strings.Split(runtime, "-")
	if len(f) != 3 {
		return ""
	}
	return strings.ReplaceAll(f[1], ".", "_") + "/" + strings.ToUpper(f[2])
}

// runtimeOverrides are the key=value items of the runtime's own tune command other than those
// the Trainer copies itself: with command [tune, run] the Trainer rebuilds the recipe and config
// and keeps only its immutable paths, so the runtime's dataset settings would be lost.
func runtimeOverrides(cmd []string) []string {
	var out []string
	for _, c := range cmd {
		k, _, ok := strings.Cut(c, "=")
		if !ok || strings.HasPrefix(k, "-") || slices.Contains(tuneImmutable, k) {
			continue
		}
		out = append(out, c)
	}
	return out
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

// optionalInt is a count field a step may leave out, by its name under its parent.
type optionalInt struct {
	v    *int32
	name string
}

// atLeastOne refuses, under p, each field that is set below 1, with msg.
func atLeastOne(p *field.Path, msg string, fields ...optionalInt) field.ErrorList {
	var errs field.ErrorList
	for _, f := range fields {
		if f.v != nil && *f.v < 1 {
			errs = append(errs, field.Invalid(p.Child(f.name), *f.v, msg))
		}
	}
	return errs
}
