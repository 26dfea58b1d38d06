package argo_test

import (
	"fmt"
	"net/http/httptest"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/test/internal/argoharness"
)

// A declared output result-k40 of a 40-key result, and result-model_uri next to a NaN loss,
// reach the next step through Argo's own controller and agent: every key of the value is an
// output, and one value with no JSON number (NaN) costs no other key its output.
func TestDeclaredResultOutputsAreFilled(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	wf := harness.Submit(t, fmt.Sprintf(`
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: train-results-}
spec:
  entrypoint: main
  serviceAccountName: trainstep-workflow
  templates:
    - name: main
      dag:
        tasks:
          - {name: train, template: train}
          - name: evaluate
            template: evaluate
            dependencies: [train]
            arguments:
              parameters:
                - {name: k40, value: "{{tasks.train.outputs.parameters.result-k40}}"}
                - {name: uri, value: "{{tasks.train.outputs.parameters.result-model_uri}}"}
                - {name: loss, value: "{{tasks.train.outputs.parameters.result-loss}}"}
    - name: train
      outputs:
        parameters:
          - {name: result-k40, valueFrom: {supplied: {}}}
          - {name: result-model_uri, valueFrom: {supplied: {}}}
          - {name: result-loss, valueFrom: {supplied: {}}}
      plugin:
        trainstep:
          key: "{{node.name}}"
          framework: xgboost
          trainer:
            func: |
              def train():
                  out = {"k%%02d" %% i: i for i in range(1, 41)}
                  out.update(model_uri="s3://bucket/model", loss=float("nan"))
                  return out
    - name: evaluate
      inputs: {parameters: [{name: k40}, {name: uri}, {name: loss}]}
      http:
        url: "%[1]s/evaluate"
        method: POST
        body: "k40={{inputs.parameters.k40}} uri={{inputs.parameters.uri}} loss={{inputs.parameters.loss}}"
`, srv.URL))
	harness.RunAgent(t, wf.Name, e2eTimeout)
	got := harness.WaitPhase(t, wf.Name, e2eTimeout)
	require.Equal(t, wfv1.WorkflowSucceeded, got.Status.Phase, "%s\n%s", got.Status.Message, argoharness.Nodes(got))
	assert.Equal(t, []string{"k40=40 uri=s3://bucket/model loss=NaN"}, rec.bodies())
}

// Keys that are one string in JSON ({1: …, "1": …}) fail the step instead of silently keeping
// the last. (The node's log names both keys; this harness's pods carry no log tail, so
// TestLocalResultKeysAreAllOutputsAndNeverCollide in test/e2e/cli checks the wording.)
func TestCollidingResultKeysFailTheStep(t *testing.T) {
	wf := harness.Submit(t, `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: train-collide-}
spec:
  entrypoint: train
  serviceAccountName: trainstep-workflow
  templates:
    - name: train
      plugin:
        trainstep:
          key: "{{node.name}}"
          framework: xgboost
          trainer:
            func: |
              def train():
                  return {1: "one", "1": "uno", "model_uri": "s3://bucket/model"}
`)
	harness.RunAgent(t, wf.Name, e2eTimeout)
	got := harness.WaitPhase(t, wf.Name, e2eTimeout)
	require.Equal(t, wfv1.WorkflowFailed, got.Status.Phase, argoharness.Nodes(got))
	train := got.Status.Nodes.FindByDisplayName(wf.Name)
	require.NotNil(t, train, argoharness.Nodes(got))
	assert.Equal(t, wfv1.NodeFailed, train.Phase)
	assert.Contains(t, train.Message, "jobset failed due to one or more job failures")
	require.NotNil(t, train.Outputs, "a failed step still carries every output")
	for _, p := range train.Outputs.Parameters {
		assert.NotEqual(t, "result-1", p.Name, "no output of a lost key")
	}
}
