package step

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseStrict(t *testing.T) {
	cases := map[string]struct {
		yaml    string
		wantErr []string // substrings of the error
	}{
		"minimal": {yaml: "framework: torch\ntrainer: {func: 'def f(): pass'}\n"},
		"json":    {yaml: `{"framework":"jax","trainer":{"numNodes":2}}`},
		"unknown top-level key with hint": {
			yaml:    "framwork: torch\ntrainer: {}\n",
			wantErr: []string{"framwork", `did you mean "framework"?`},
		},
		"unknown nested key": {
			yaml:    "framework: torch\ntrainer: {}\nruntimeConfig: {pipIndexUrl: [x]}\n",
			wantErr: []string{"runtimeConfig.pipIndexUrl", `did you mean "pipIndexUrls"?`},
		},
		"unknown initializer key": {
			yaml:    "framework: torch\ntrainer: {}\ninitializer: {dataset: {storageURI: hf://x}}\n",
			wantErr: []string{"initializer.dataset.storageURI", `"storageUri"`},
		},
		"wrong type": {
			yaml:    "framework: torch\ntrainer: {}\nlabels: [a, b]\n",
			wantErr: []string{"labels", "must be an object"},
		},
		"bad timeout": {
			yaml:    "framework: torch\ntrainer: {}\ntimeout: soon\n",
			wantErr: []string{"timeout", "duration"},
		},
		"duplicate key": {
			yaml:    "framework: torch\nframework: jax\ntrainer: {}\n",
			wantErr: []string{"framework", "already"},
		},
		"not yaml": {yaml: "framework: [\n", wantErr: []string{"not valid YAML"}},
		"empty":    {yaml: "", wantErr: []string{"empty"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := Parse([]byte(tc.yaml))
			if len(tc.wantErr) == 0 {
				require.NoError(t, err)
				require.NotNil(t, s)
				return
			}
			require.Error(t, err)
			assert.True(t, IsInvalid(err), "bad input must be an InvalidError: %v", err)
			for _, want := range tc.wantErr {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}

func TestTrainerFieldsStayRaw(t *testing.T) {
	s, err := Parse([]byte("trainer:\n  kind: TorchTrainer\n  maxRestarts: 3\n  numNodes: 2\n"))
	require.NoError(t, err)
	assert.Equal(t, "TorchTrainer", s.Trainer.Kind)
	assert.JSONEq(t, `{"maxRestarts":3,"numNodes":2}`, string(s.Trainer.Fields))
}

func TestDecodeStrictKeepsNumbers(t *testing.T) {
	var out struct {
		Args map[string]any `json:"args"`
	}
	require.Empty(t, DecodeStrict([]byte(`{"args":{"a":1,"b":1.0,"c":1e3}}`), &out, nil))
	assert.Equal(t, "1", out.Args["a"].(interface{ String() string }).String())
	assert.Equal(t, "1.0", out.Args["b"].(interface{ String() string }).String())
}

func TestValidate(t *testing.T) {
	cases := map[string]struct {
		yaml  string
		field string
	}{
		"no framework or kind":  {"trainer: {}", "framework"},
		"runtime without name":  {"framework: torch\ntrainer: {}\nruntime: {kind: ClusterTrainingRuntime}", "runtime.name"},
		"runtime kind":          {"framework: torch\ntrainer: {}\nruntime: {name: x, kind: Runtime}", "runtime.kind"},
		"env name":              {"framework: torch\ntrainer: {}\nruntimeConfig: {env: {1BAD: x}}", "runtimeConfig.env[1BAD]"},
		"pip url":               {"framework: torch\ntrainer: {}\nruntimeConfig: {pipIndexUrls: [pypi]}", "runtimeConfig.pipIndexUrls[0]"},
		"package option":        {"framework: torch\ntrainer: {}\nruntimeConfig: {packagesToInstall: [--pre]}", "runtimeConfig.packagesToInstall[0]"},
		"storage uri":           {"framework: torch\ntrainer: {}\ninitializer: {model: {storageUri: llama}}", "initializer.model.storageUri"},
		"reserved label":        {"framework: torch\ntrainer: {}\nlabels: {trainstep.dev/engine: x}", "labels[trainstep.dev/engine]"},
		"bad label value":       {"framework: torch\ntrainer: {}\nlabels: {team: 'a b'}", "labels[team]"},
		"queue name":            {"framework: torch\ntrainer: {}\nqueueName: Team_A", "queueName"},
		"negative timeout":      {"framework: torch\ntrainer: {}\ntimeout: -1m", "timeout"},
		"keep without timeout":  {"framework: torch\ntrainer: {}\nkeepOnTimeout: true", "timeout"},
		"framework not a label": {"framework: Torch!\ntrainer: {}", "framework"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := Parse([]byte(tc.yaml))
			require.NoError(t, err)
			errs := s.Validate()
			require.NotEmpty(t, errs)
			assert.Equal(t, tc.field, errs[0].Field, errs.ToAggregate().Error())
		})
	}
}
