package v1beta1_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	tektonv1beta1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
)

// The local copy must read and write the same JSON as Tekton's own type (only this test links
// Tekton's packages; the controller does not).
func TestRoundTripMatchesTekton(t *testing.T) {
	cases := map[string]string{
		"as the PipelineRun controller creates it": `
apiVersion: tekton.dev/v1beta1
kind: CustomRun
metadata: {name: pr-train, namespace: ns, labels: {tekton.dev/pipelineTask: train}}
spec:
  customRef: {apiVersion: trainstep.dev/v1alpha1, kind: TrainStep}
  params:
  - {name: framework, value: jax}
  - {name: runtimeConfig.packagesToInstall, value: [a, b]}
  - {name: trainer.funcArgs, value: {x: "1"}}
  retries: 2
  serviceAccountName: default
  timeout: 1h0m0s
  status: RunCancelled
  statusMessage: CustomRun cancelled as the PipelineRun it belongs to has timed out.
`,
		"embedded spec": `
apiVersion: tekton.dev/v1beta1
kind: CustomRun
metadata: {name: x}
spec:
  customSpec:
    apiVersion: trainstep.dev/v1alpha1
    kind: TrainStep
    spec: {framework: jax, trainer: {numNodes: 2}}
  serviceAccountName: ""
`,
		"finished with retries": `
apiVersion: tekton.dev/v1beta1
kind: CustomRun
metadata: {name: x}
spec: {serviceAccountName: ""}
status:
  observedGeneration: 2
  conditions:
  - {type: Succeeded, status: "True", reason: Succeeded, message: done, lastTransitionTime: "2026-01-02T03:04:05Z"}
  startTime: "2026-01-02T03:00:00Z"
  completionTime: "2026-01-02T03:04:05Z"
  results: [{name: trainjob-name, value: train-abc}, {name: metrics, value: "{}"}]
  retriesStatus:
  - conditions: [{type: Succeeded, status: "False", reason: FailedJobs, message: boom, lastTransitionTime: "2026-01-02T03:01:00Z"}]
    startTime: "2026-01-02T02:59:00Z"
    completionTime: "2026-01-02T03:01:00Z"
    extraFields: {trainJob: train-old}
  extraFields: {trainJob: train-abc}
`,
	}
	for name, y := range cases {
		t.Run(name, func(t *testing.T) {
			js, err := yaml.YAMLToJSONStrict([]byte(y))
			require.NoError(t, err)
			theirs := &tektonv1beta1.CustomRun{}
			require.NoError(t, json.Unmarshal(js, theirs))
			ours := &v1beta1.CustomRun{}
			require.NoError(t, json.Unmarshal(js, ours))
			a, err := json.Marshal(theirs)
			require.NoError(t, err)
			b, err := json.Marshal(ours)
			require.NoError(t, err)
			assert.JSONEq(t, string(a), string(b))
			assert.Equal(t, theirs.IsCancelled(), ours.IsCancelled())
			assert.Equal(t, theirs.GetRetryCount(), len(ours.Status.RetriesStatus))
			// Our copy keeps the deep-copy contract.
			assert.Equal(t, ours, ours.DeepCopy())
		})
	}
}

func TestRefersTo(t *testing.T) {
	const av, kind = "trainstep.dev/v1alpha1", "TrainStep"
	embedded := &v1beta1.EmbeddedCustomRunSpec{}
	embedded.APIVersion, embedded.Kind = av, kind
	cases := map[string]struct {
		spec v1beta1.CustomRunSpec
		want bool
	}{
		"customRef":        {spec: v1beta1.CustomRunSpec{CustomRef: &v1beta1.TaskRef{APIVersion: av, Kind: kind}}, want: true},
		"customRef other":  {spec: v1beta1.CustomRunSpec{CustomRef: &v1beta1.TaskRef{APIVersion: av, Kind: "Wait"}}},
		"customSpec":       {spec: v1beta1.CustomRunSpec{CustomSpec: embedded}, want: true},
		"customSpec other": {spec: v1beta1.CustomRunSpec{CustomSpec: &v1beta1.EmbeddedCustomRunSpec{}}},
		"neither":          {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			run := &v1beta1.CustomRun{Spec: tc.spec}
			assert.Equal(t, tc.want, run.RefersTo(av, kind))
		})
	}
}

// TektonRelease names the Tekton this test proves the copy against: go.mod's tektoncd/pipeline.
func TestTektonReleaseIsGoModsTekton(t *testing.T) {
	out, err := exec.CommandContext(t.Context(), "go", "list", "-m", "-f", "{{.Version}}", "github.com/tektoncd/pipeline").Output()
	require.NoError(t, err)
	assert.Equal(t, strings.TrimSpace(string(out)), v1beta1.TektonRelease, "set v1beta1.TektonRelease to the tektoncd/pipeline version in go.mod")
}
