package step

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseStrict(t *testing.T) {
	cases := map[string]struct {
		yaml    string
		wantErr []string // substrings of the error
	}{
		"minimal":          {yaml: "framework: torch\ntrainer: {func: 'def f(): pass'}\n"},
		"json":             {yaml: `{"framework":"jax","trainer":{"numNodes":2}}`},
		"document markers": {yaml: "---\nframework: torch\ntrainer: {}\n---\n# nothing more\n"},
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
			wantErr: []string{"framework", "already set on line 1"},
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

// A step that does not parse names the line, the key and the fix, never "<nil>".
func TestParseErrorsNameLineKeyAndFix(t *testing.T) {
	cases := map[string]struct {
		doc  string
		want string // the whole error
	}{
		"duplicate top-level key": {
			doc:  "framework: torch\ntrainer: {}\nframework: jax\n",
			want: `invalid training step: framework: Invalid value: "framework": line 3: already set on line 1; keep one`,
		},
		"duplicate nested key": {
			doc:  "framework: torch\ntrainer:\n  funcArgs:\n    lr: 1\n    lr: 2\n",
			want: `invalid training step: trainer.funcArgs.lr: Invalid value: "lr": line 5: already set on line 4; keep one`,
		},
		"duplicate key in JSON": {
			doc:  "{\"framework\": \"torch\",\n \"trainer\": {\"numNodes\": 1,\n \"numNodes\": 2}}",
			want: `invalid training step: trainer.numNodes: Invalid value: "numNodes": line 3: already set on line 2; keep one`,
		},
		"infinity": {
			doc: "framework: torch\ntrainer:\n  funcArgs: {lr: .inf}\n",
			want: `invalid training step: trainer.funcArgs.lr: Invalid value: ".inf": line 3: infinity and NaN have no JSON form, ` +
				`so they cannot be passed on; quote it (".inf") and convert it in Python with float()`,
		},
		"nan in a list": {
			doc:  "framework: torch\ntrainer:\n  funcArgs:\n    xs: [1, .NaN]\n",
			want: `invalid training step: trainer.funcArgs.xs[1]: Invalid value: ".NaN": line 4: infinity and NaN`,
		},
		"float out of range": {
			doc:  "framework: torch\ntrainer:\n  funcArgs: {lr: 1e999}\n",
			want: `invalid training step: trainer.funcArgs.lr: Invalid value: "1e999": line 3: is out of range for a 64-bit float; quote it to pass a string`,
		},
		"unclosed flow mapping": {
			doc: "framework: torch\ntrainer:\n  funcArgs: {lr: 1\n  func: x\n",
			want: `invalid training step: trainer.funcArgs: Invalid value: "funcArgs: {lr: 1": line 3: not valid YAML or JSON ` +
				`(did not find expected ',' or '}'); check the quoting, brackets and indentation there and on the line before`,
		},
		"tab indentation": {
			doc:  "framework: torch\ntrainer:\n\tfunc: x\n",
			want: `line 3: not valid YAML or JSON (found character that cannot start any token); YAML indents with spaces, not tabs`,
		},
		"error on the first line": {
			doc:  "framework: torch: jax\ntrainer: {}\n",
			want: `invalid training step: framework: Invalid value: "framework: torch: jax": line 1: not valid YAML or JSON (mapping values are not allowed in this context)`,
		},
		"env value not a string": {
			doc:  "framework: torch\ntrainer: {}\nruntimeConfig: {env: {A: 1}}\n",
			want: `invalid training step: runtimeConfig.env[A]: Invalid value: 1: must be a string (quote numbers and booleans)`,
		},
		"env value from a secret": {
			doc:  "framework: torch\ntrainer: {}\nruntimeConfig: {env: {A: x, T: {secretKeyRef: {name: s, key: k}}}}\n",
			want: `runtimeConfig.env[T]: Invalid value: {"secretKeyRef":{"key":"k","name":"s"}}: must be a string; a value from a Secret or ConfigMap goes in pod.env instead`,
		},
		"two documents": {
			doc:  "framework: torch\ntrainer: {}\n---\nframework: jax\n",
			want: `invalid training step: Invalid value: "---": line 3: a second YAML document; a file holds one step, so remove the --- and what follows`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			require.Error(t, err)
			assert.True(t, IsInvalid(err), "bad input must be an InvalidError: %v", err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "<nil>")
		})
	}
}

// YAML's own spellings arrive as the JSON the trainers decode, in the user's order.
func TestParseYAMLSpellings(t *testing.T) {
	s, err := Parse([]byte(`
framework: torch
trainer:
  funcArgs:
    <<: &base {b: 1, a: 2}
    hex: 0x1F
    under: 1_000
    plus: +1.5
    dot: .5
    trail: 1.
    yes: yes
    day: 2024-01-02
    a: 3
    same: *base
`))
	require.NoError(t, err)
	assert.Equal(t, `{"funcArgs":{"hex":31,"under":1000,"plus":1.5,"dot":0.5,"trail":1.0,"yes":"yes","day":"2024-01-02","a":3,"same":{"b":1,"a":2},"b":1}}`,
		string(s.Trainer.Fields), "explicit keys win over merged ones (a: 3), which come last")
}

func TestEnvRoundTrips(t *testing.T) {
	s, err := Parse([]byte("framework: torch\ntrainer: {}\nruntimeConfig:\n  env: {ROOT: /data, FILE: $(ROOT)/x}\n"))
	require.NoError(t, err)
	assert.Equal(t, Env{{"ROOT", "/data"}, {"FILE", "$(ROOT)/x"}}, s.RuntimeConfig.Env)
	b, err := json.Marshal(s)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"env":{"ROOT":"/data","FILE":"$(ROOT)/x"}`)
	again, err := Parse(b)
	require.NoError(t, err)
	assert.Equal(t, s, again)
	empty, err := Parse([]byte("framework: torch\ntrainer: {}\nruntimeConfig: {env: {}}\n"))
	require.NoError(t, err)
	assert.NotNil(t, empty.RuntimeConfig.Env, "a set, empty env still replaces the trainer's")
	b, err = json.Marshal(empty)
	require.NoError(t, err)
	emptyAgain, err := Parse(b)
	require.NoError(t, err)
	assert.NotNil(t, emptyAgain.RuntimeConfig.Env, "and stays set through JSON: %s", b)
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
		"zero hangTimeout":      {"framework: torch\ntrainer: {}\nhangTimeout: 0s", "hangTimeout"},
		"retry limit 0":         {"framework: torch\ntrainer: {}\nretry: {limit: 0}", "retry.limit"},
		"retry limit 11":        {"framework: torch\ntrainer: {}\nretry: {limit: 11}", "retry.limit"},
		"negative backoff":      {"framework: torch\ntrainer: {}\nretry: {limit: 2, backoff: -1s}", "retry.backoff"},
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
