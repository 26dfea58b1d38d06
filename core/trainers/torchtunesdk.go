package trainers

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/core/step"
)

// The Kubeflow SDK's TorchTuneConfig fields and the torchtune overrides it makes of them, as
// kubeflow/sdk's kubeflow/trainer/backends/kubernetes/utils.py does in
// get_args_using_torchtune_config, get_args_from_peft_config and
// get_args_from_dataset_preprocess_config (its types in kubeflow/trainer/types/types.py): the
// same keys, values spelled as Python's str() spells them, in the same order. A step written from
// an SDK notebook trains the same.

// LoraConfig is the SDK's LoraConfig: LoRA, QLoRA (quantizeBase) or DoRA (useDora).
type LoraConfig struct {
	ApplyLoraToMlp    *bool `json:"applyLoraToMlp,omitempty"`
	ApplyLoraToOutput *bool `json:"applyLoraToOutput,omitempty"`
	// LoraAttnModules are the attention projections LoRA applies to; unset is the SDK's default,
	// tuneDefaultAttnModules.
	LoraAttnModules []string `json:"loraAttnModules,omitempty"`
	LoraRank        *int32   `json:"loraRank,omitempty"`
	LoraAlpha       *int32   `json:"loraAlpha,omitempty"`
	LoraDropout     *float64 `json:"loraDropout,omitempty"`
	QuantizeBase    *bool    `json:"quantizeBase,omitempty"`
	UseDora         *bool    `json:"useDora,omitempty"`
}

// InstructDataset is the SDK's TorchTuneInstructDataset: torchtune's instruct_dataset, read as
// these fields say.
type InstructDataset struct {
	// Source is the data files' format (the SDK's DataFormat).
	Source          string `json:"source,omitempty"`
	Split           string `json:"split,omitempty"`
	TrainOnInput    *bool  `json:"trainOnInput,omitempty"`
	NewSystemPrompt string `json:"newSystemPrompt,omitempty"`
	// ColumnMap maps instruct_dataset's columns (input, output) to the data's; step.Env is an
	// ordered mapping of strings, and the order reaches the override as written.
	ColumnMap step.Env `json:"columnMap,omitzero"`
}

var (
	// tuneDefaultAttnModules is LoraConfig.lora_attn_modules' default in the SDK.
	tuneDefaultAttnModules = []string{"q_proj", "v_proj", "output_proj"}
	// tuneAttnModules are the modules torchtune's LoRA builders take (LORA_ATTN_MODULES).
	tuneAttnModules = []string{"q_proj", "k_proj", "v_proj", "output_proj"}
	// tuneDataFormats are the SDK's DataFormat values.
	tuneDataFormats = []string{"json", "csv", "parquet", "arrow", "text", "xml"}
	// tuneColumns are the columns torchtune's InputOutputToMessages maps; it requires input and
	// output when a column map is given.
	tuneColumns = []string{"input", "output", "image"}
)

// TorchTuneInstructDataset is what the SDK sets dataset to (TORCH_TUNE_INSTRUCT_DATASET).
const TorchTuneInstructDataset = "torchtune.datasets.instruct_dataset"

func (l *LoraConfig) validate(p *field.Path) field.ErrorList {
	if l == nil {
		return nil
	}
	var errs field.ErrorList
	if l.LoraAttnModules != nil && len(l.LoraAttnModules) == 0 {
		errs = append(errs, field.Required(p.Child("loraAttnModules"),
			"name at least one of q_proj, k_proj, v_proj, output_proj, or leave it out for the SDK's default [q_proj, v_proj, output_proj]: without it the Trainer picks a full fine-tuning recipe"))
	}
	seen := map[string]bool{}
	for i, m := range l.LoraAttnModules {
		switch {
		case !slices.Contains(tuneAttnModules, m):
			errs = append(errs, field.NotSupported(p.Child("loraAttnModules").Index(i), m, tuneAttnModules))
		case seen[m]:
			errs = append(errs, field.Duplicate(p.Child("loraAttnModules").Index(i), m))
		}
		seen[m] = true
	}
	errs = append(errs, atLeastOne(p, "must be 1 or more, such as 8 or 16", optionalInt{l.LoraRank, "loraRank"}, optionalInt{l.LoraAlpha, "loraAlpha"})...)
	if d := l.LoraDropout; d != nil && (*d < 0 || *d >= 1) {
		errs = append(errs, field.Invalid(p.Child("loraDropout"), *d, "must be a probability from 0 up to (not including) 1, such as 0.05"))
	}
	return errs
}

func (d *InstructDataset) validate(p *field.Path) field.ErrorList {
	if d == nil {
		return nil
	}
	var errs field.ErrorList
	if d.Source != "" && !slices.Contains(tuneDataFormats, d.Source) {
		errs = append(errs, field.NotSupported(p.Child("source"), d.Source, tuneDataFormats))
	}
	if len(d.ColumnMap) == 0 {
		return errs
	}
	for _, c := range d.ColumnMap {
		if !slices.Contains(tuneColumns, c.Name) {
			errs = append(errs, field.NotSupported(p.Child("columnMap").Key(c.Name), c.Name, tuneColumns))
		}
	}
	for _, need := range []string{"input", "output"} {
		if !d.ColumnMap.Has(need) {
			errs = append(errs, field.Required(p.Child("columnMap").Key(need),
				"torchtune's instruct_dataset needs both input and output in a column map, such as {input: question, output: answer}"))
		}
	}
	return errs
}

// tuneArg is one override a named field makes: its torchtune key, value, and the field it is from.
type tuneArg struct {
	key, value string
	from       *field.Path
}

// tuneArgs are the named fields' overrides in get_args_using_torchtune_config's order. dtype and
// loss are their values (bf16), where the SDK writes str() of its enum (DataType.BF16, which
// torchtune does not take; kubeflow/sdk#548); dataset.source is the value in both.
func (t *TorchTuneTrainer) tuneArgs() []tuneArg {
	var out []tuneArg
	add := func(key, value string, from *field.Path) { out = append(out, tuneArg{key, value, from}) }
	if t.Dtype != "" {
		add("dtype", t.Dtype, trainerPath.Child("dtype"))
	}
	if t.BatchSize != nil {
		add("batch_size", strconv.Itoa(int(*t.BatchSize)), trainerPath.Child("batchSize"))
	}
	if t.Epochs != nil {
		add("epochs", strconv.Itoa(int(*t.Epochs)), trainerPath.Child("epochs"))
	}
	if t.Loss != "" {
		add("loss", t.Loss, trainerPath.Child("loss"))
	}
	out = append(out, t.PeftConfig.tuneArgs(trainerPath.Child("peftConfig"))...)
	return append(out, t.DatasetPreprocessConfig.tuneArgs(trainerPath.Child("datasetPreprocessConfig"))...)
}

// tuneArgs is get_args_from_peft_config: each field that is set (False and 0 too), then the
// attention modules, the SDK's default when unset.
func (l *LoraConfig) tuneArgs(p *field.Path) []tuneArg {
	if l == nil {
		return nil
	}
	var out []tuneArg
	for _, f := range []struct {
		key, name string
		value     string
	}{
		{"model.apply_lora_to_mlp", "applyLoraToMlp", pyBool(l.ApplyLoraToMlp)},
		{"model.apply_lora_to_output", "applyLoraToOutput", pyBool(l.ApplyLoraToOutput)},
		{"model.lora_rank", "loraRank", pyInt(l.LoraRank)},
		{"model.lora_alpha", "loraAlpha", pyInt(l.LoraAlpha)},
		{"model.lora_dropout", "loraDropout", pyFloatOf(l.LoraDropout)},
		{"model.quantize_base", "quantizeBase", pyBool(l.QuantizeBase)},
		{"model.use_dora", "useDora", pyBool(l.UseDora)},
	} {
		if f.value != "" {
			out = append(out, tuneArg{f.key, f.value, p.Child(f.name)})
		}
	}
	modules := l.LoraAttnModules
	if modules == nil {
		modules = tuneDefaultAttnModules
	}
	if len(modules) > 0 {
		out = append(out, tuneArg{"model.lora_attn_modules", "[" + strings.Join(modules, ",") + "]", p.Child("loraAttnModules")})
	}
	return out
}

// tuneArgs is get_args_from_dataset_preprocess_config: the dataset always, then each field set
// (train_on_input also when false; split, the prompt and the column map only when not empty).
func (d *InstructDataset) tuneArgs(p *field.Path) []tuneArg {
	if d == nil {
		return nil
	}
	out := []tuneArg{{"dataset", TorchTuneInstructDataset, p}}
	if d.Source != "" {
		out = append(out, tuneArg{"dataset.source", d.Source, p.Child("source")})
	}
	if d.Split != "" {
		out = append(out, tuneArg{"dataset.split", d.Split, p.Child("split")})
	}
	if v := pyBool(d.TrainOnInput); v != "" {
		out = append(out, tuneArg{"dataset.train_on_input", v, p.Child("trainOnInput")})
	}
	if d.NewSystemPrompt != "" {
		out = append(out, tuneArg{"dataset.new_system_prompt", d.NewSystemPrompt, p.Child("newSystemPrompt")})
	}
	if len(d.ColumnMap) > 0 {
		out = append(out, tuneArg{"dataset.column_map", pyStringDict(d.ColumnMap), p.Child("columnMap")})
	}
	return out
}

func tuneArgStrings(args []tuneArg) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a.key + "=" + a.value
	}
	return out
}

// pyBool, pyInt and pyFloatOf spell a set value as Python's str() does, and unset as "".
func pyBool(b *bool) string {
	if b == nil {
		return ""
	}
	return configValue(*b)
}

func pyInt(n *int32) string {
	if n == nil {
		return ""
	}
	return strconv.Itoa(int(*n))
}

func pyFloatOf(f *float64) string {
	if f == nil {
		return ""
	}
	s, err := pyFloat(*f)
	if err != nil {
		return fmt.Sprint(*f) // JSON has no infinity or NaN, so a parsed step never gets here
	}
	return s
}

// pyStringDict is str() of a Python dict of strings, in its order: {'input': 'question'}.
func pyStringDict(m step.Env) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, e := range m {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(pyRepr(e.Name))
		b.WriteString(": ")
		b.WriteString(pyRepr(e.Value))
	}
	b.WriteByte('}')
	return b.String()
}

// pyRepr is repr() of a Python str: single quotes unless the text has a single quote and no
// double one, backslashes and the chosen quote escaped, control characters as escapes.
func pyRepr(s string) string {
	quote := byte('\'')
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		quote = '"'
	}
	var b strings.Builder
	b.WriteByte(quote)
	for _, r := range s {
		switch {
		case r == '\\' || r == rune(quote):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(quote)
	return b.String()
}
