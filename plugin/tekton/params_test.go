package tekton

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
)

func mustRun(t *testing.T, y string) *v1beta1.CustomRun {
	t.Helper()
	run := &v1beta1.CustomRun{}
	require.NoError(t, yaml.UnmarshalStrict([]byte(y), run))
	return run
}

func TestSpecFromRun(t *testing.T) {
	cases := map[string]struct {
		run  string
		want string // the step as JSON
	}{
		"path params, typed by the step": {
			run: `spec:
  params:
  - {name: framework, value: jax}
  - {name: trainer.numNodes, value: "2"}
  - {name: trainer.func, value: "def f(): pass"}
  - {name: labels, value: {team: "42", sim: "true"}}
  - {name: initializer.dataset.storageUri, value: "123"}
  - {name: runtimeConfig.packagesToInstall, value: [numpy, "1"]}`,
			want: `{"framework":"jax","trainer":{"func":"def f(): pass","numNodes":2},"labels":{"sim":"true","team":"42"},
				"initializer":{"dataset":{"storageUri":"123"}},"runtimeConfig":{"packagesToInstall":["numpy","1"]}}`,
		},
		"object param into trainer fields reads numbers": {
			run: `spec:
  params:
  - {name: framework, value: jax}
  - {name: trainer.func, value: "def f(epochs, lr, name): pass"}
  - {name: trainer.funcArgs, value: {epochs: "3", lr: "0.5", name: run-1}}`,
			want: `{"framework":"jax","trainer":{"func":"def f(epochs, lr, name): pass","funcArgs":{"epochs":3,"lr":0.5,"name":"run-1"}}}`,
		},
		"step param, overridden by a path param whatever the order": {
			run: `spec:
  params:
  - {name: trainer.numNodes, value: "4"}
  - name: step
    value: |
      framework: jax
      trainer: {func: "def f(): pass", numNodes: 1}`,
			want: `{"framework":"jax","trainer":{"func":"def f(): pass","numNodes":4}}`,
		},
		"customSpec, params over it": {
			run: `spec:
  customSpec:
    apiVersion: trainstep.dev/v1alpha1
    kind: TrainStep
    spec: {framework: jax, trainer: {func: "def f(): pass"}, labels: {a: b}}
  params:
  - {name: labels.c, value: d}`,
			want: `{"framework":"jax","trainer":{"func":"def f(): pass"},"labels":{"a":"b","c":"d"}}`,
		},
		"env values stay strings": {
			run: `spec:
  params:
  - {name: runtimeConfig.env, value: {A: "1"}}
  - {name: runtimeConfig.env.B, value: "true"}
  - {name: initializer.model.env.C, value: "2.0"}`,
			want: `{"trainer":{},"runtimeConfig":{"env":{"A":"1","B":"true"}},"initializer":{"model":{"env":{"C":"2.0"}}}}`,
		},
		"trainer kind stays a string": {
			run: `spec:
  params:
  - {name: trainer.kind, value: "123"}
  - {name: trainer.image, value: img}`,
			want: `{"trainer":{"kind":"123","image":"img"}}`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, _, err := specFromRun(mustRun(t, tc.run))
			require.NoError(t, err)
			got, err := json.Marshal(s)
			require.NoError(t, err)
			assert.JSONEq(t, tc.want, string(got))
		})
	}
}

func TestSpecFromRunNamesTheParam(t *testing.T) {
	cases := map[string]struct {
		run  string
		want []string
	}{
		"unknown field":      {run: "spec:\n  params:\n  - {name: framwork, value: jax}", want: []string{`param "framwork"`}},
		"wrong type":         {run: "spec:\n  params:\n  - {name: timeout, value: soon}", want: []string{`param "timeout"`}},
		"step not YAML":      {run: "spec:\n  params:\n  - {name: step, value: 'a: [b'}", want: []string{`param "step"`, "not valid YAML"}},
		"step is an array":   {run: "spec:\n  params:\n  - {name: step, value: [a]}", want: []string{`param "step"`, "not an array"}},
		"bad name":           {run: "spec:\n  params:\n  - {name: 'a b', value: x}", want: []string{`param "a b"`, "dotted path"}},
		"given twice":        {run: "spec:\n  params:\n  - {name: framework, value: jax}\n  - {name: framework, value: torch}", want: []string{`param "framework": given twice`}},
		"error inside step":  {run: "spec:\n  params:\n  - {name: step, value: 'bogus: 1'}", want: []string{`param "step"`, "bogus"}},
		"customSpec not obj": {run: "spec:\n  customSpec: {apiVersion: a, kind: b, spec: [1]}", want: []string{"customSpec.spec"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := specFromRun(mustRun(t, tc.run))
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestTruncateKeepsTheTail(t *testing.T) {
	long := "head\n" + string(make([]byte, 3*maxMessage)) + "\nRuntimeError: the end"
	got := truncate(long)
	assert.LessOrEqual(t, len(got), maxMessage)
	assert.Contains(t, got, "head")
	assert.Contains(t, got, "RuntimeError: the end")
	assert.Equal(t, "short", truncate("short"))
}

// The step param and customSpec are YAML or JSON like a step file: numbers keep their literal
// text, so 2.0 reaches the function as a float and big integers stay exact.
func TestSpecFromRunKeepsNumberLiterals(t *testing.T) {
	const want = `"funcArgs":{"lr":2.0,"z":-0.0,"big":123456789012345678901234567890}`
	t.Run("step param", func(t *testing.T) {
		s, _, err := specFromRun(mustRun(t, `spec:
  params:
  - name: step
    value: |
      framework: jax
      trainer: {func: "def f(**kw): pass", funcArgs: {lr: 2.0, z: -0.0, big: 123456789012345678901234567890}}`))
		require.NoError(t, err)
		assert.Contains(t, string(s.Trainer.Fields), want)
	})
	t.Run("customSpec", func(t *testing.T) {
		run := mustRun(t, "spec:\n  customSpec: {apiVersion: trainstep.dev/v1alpha1, kind: TrainStep, spec: {}}")
		// As the apiserver hands it over: JSON, numbers as written.
		run.Spec.CustomSpec.Spec.Raw = []byte(`{"framework": "jax", "trainer": {"func": "def f(**kw): pass",
			"funcArgs": {"lr": 2.0, "z": -0.0, "big": 123456789012345678901234567890}}}`)
		s, _, err := specFromRun(run)
		require.NoError(t, err)
		assert.Contains(t, string(s.Trainer.Fields), want)
	})
}

// A step param is read like a step file: env and funcArgs keep the order written, so $(ROOT)
// is defined before $(ROOT)/x uses it, while path params still override.
func TestSpecFromRunKeepsTheStepParamsOrder(t *testing.T) {
	s, _, err := specFromRun(mustRun(t, `spec:
  params:
  - {name: runtimeConfig.env.ZZ, value: last}
  - name: step
    value: |
      framework: jax
      trainer: {func: "def f(**kw): pass", funcArgs: {z: 1, a: 2}}
      runtimeConfig:
        env: {ROOT: /data, FILE: $(ROOT)/x}`))
	require.NoError(t, err)
	assert.Equal(t, step.Env{{Name: "ROOT", Value: "/data"}, {Name: "FILE", Value: "$(ROOT)/x"}, {Name: "ZZ", Value: "last"}}, s.RuntimeConfig.Env)
	assert.Contains(t, string(s.Trainer.Fields), `"funcArgs":{"z":1,"a":2}`)
}
