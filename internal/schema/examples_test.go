package schema

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainers"
)

const languageServerLine = "# yaml-language-server: $schema=../../schemas/step.schema.json"

// compiled is schemas/step.schema.json, the file editors load, compiled by a JSON Schema
// (draft 2020-12) validator.
func compiled(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "schemas", "step.schema.json"))
	require.NoError(t, err)
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("step.schema.json", doc))
	s, err := c.Compile("step.schema.json")
	require.NoError(t, err)
	return s
}

func instance(t *testing.T, y string) any {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(y))
	require.NoError(t, err)
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(js)))
	require.NoError(t, err)
	return v
}

// Every example step names the schema for editors, validates against it, and parses.
func TestExamplesValidateAgainstTheSchema(t *testing.T) {
	s := compiled(t)
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "steps", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			first, _, _ := strings.Cut(string(b), "\n")
			assert.Equal(t, languageServerLine, first, "the first line tells editors (yaml-language-server) where the schema is")
			assert.NoError(t, s.Validate(instance(t, string(b))))
			_, err = step.Parse(b)
			assert.NoError(t, err)
		})
	}
}

// Once the kind is known (trainer.kind, or framework alone) the schema takes that kind's fields
// only, as the trainer's strict decoding does.
func TestSchemaNarrowsTheTrainerToItsKind(t *testing.T) {
	s := compiled(t)
	cases := map[string]struct {
		yaml  string
		valid bool
	}{
		"torch function":                     {"framework: torch\ntrainer: {func: 'def f(): pass', maxRestarts: 2}", true},
		"torch with a torchtune field":       {"framework: torch\ntrainer: {func: 'def f(): pass', epochs: 1}", false},
		"torchtune with its SDK fields":      {"framework: torchtune\ntrainer: {epochs: 1, peftConfig: {loraRank: 8}, datasetPreprocessConfig: {source: json}}", true},
		"torchtune with a function":          {"framework: torchtune\ntrainer: {func: 'def f(): pass'}", false},
		"torchtune with an unknown LoRA key": {"framework: torchtune\ntrainer: {peftConfig: {rank: 8}}", false},
		"the kind wins over the framework":   {"framework: torch\ntrainer: {kind: CustomTrainerContainer, image: i, command: [python]}", true},
		"container with a function field":    {"framework: torch\ntrainer: {kind: CustomTrainerContainer, image: i, func: x}", false},
		"a kind that is not registered":      {"trainer: {kind: TorchTrainr}", false},
		"an unknown framework: any field":    {"framework: mlx\ntrainer: {kind: CustomTrainer, func: x}", true},
		"secretRef as a name":                {"framework: torchtune\ntrainer: {}\ninitializer: {model: {storageUri: 'hf://m', secretRef: s}}", true},
		"secretRef as the TrainJob has it":   {"framework: torchtune\ntrainer: {}\ninitializer: {model: {storageUri: 'hf://m', secretRef: {name: s}}}", true},
		"a csi volume":                       {"framework: torch\ntrainer: {}\npod: {volumes: [{name: v, csi: {driver: d}}]}", true},
		"a hostPath volume":                  {"framework: torch\ntrainer: {}\npod: {volumes: [{name: v, hostPath: {path: /}}]}", false},
		"the header":                         {"apiVersion: trainstep.dev/v1alpha1\nkind: TrainStep\nframework: torch\ntrainer: {}", true},
		"a wrong kind":                       {"kind: TrainJob\nframework: torch\ntrainer: {}", false},
		"a namePrefix":                       {"namePrefix: nightly\nframework: torch\ntrainer: {}", true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := s.Validate(instance(t, tc.yaml))
			if tc.valid {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		})
	}
}

// Every registered kind has its rule, with its own fields.
func TestSchemaHasARulePerKind(t *testing.T) {
	reg := trainers.Builtin()
	rules := Step(reg)["allOf"].([]any)
	assert.Len(t, rules, len(reg.Kinds()))
	b, err := json.Marshal(rules)
	require.NoError(t, err)
	for _, r := range reg.Kinds() {
		assert.Contains(t, string(b), `"const":"`+r.Kind+`"`)
	}
}
