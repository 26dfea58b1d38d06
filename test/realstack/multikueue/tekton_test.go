package multikueue_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
	"github.com/trainstep/trainstep/test/internal/realstack"
	"github.com/trainstep/trainstep/test/internal/tektonharness"
)

// The Tekton face on the manager: a PipelineRun's trainstep task is dispatched to the worker;
// the waiting CustomRun says it runs there (from the mirrored status), and the run succeeds
// with the worker cluster and what is not delivered among its results.
func TestMultiKueueTektonStepRunsOnTheWorkerAndSucceeds(t *testing.T) {
	t.Parallel()
	ns := manager.Namespace(t)
	q := manager.MultiKueueQueue(t, worker, ns, realstack.NodeGPUs)
	step := fmt.Sprintf(`framework: torch
queueName: %s
trainer:
  numNodes: 1
  resourcesPerNode: {gpu: 1}
  env: {KWOK_RUN_SECONDS: "20"}
  func: |
    def train():
        return 1
startTimeout: 15s`, q)
	tektonharness.CreatePipelineRun(t, tk.Client, ns, `
apiVersion: tekton.dev/v1
kind: PipelineRun
metadata: {name: run}
spec:
  pipelineSpec:
    tasks:
    - name: train
      taskRef: `+tektonharness.Ref+`
      params:
      - name: step
        value: |
          `+strings.ReplaceAll(step, "\n", "\n          ")+`
`)
	var running string
	require.Eventually(t, func() bool {
		runs := &v1beta1.CustomRunList{}
		if tk.Client.List(t.Context(), runs, client.InNamespace(ns)) != nil || len(runs.Items) != 1 {
			return false
		}
		cond := runs.Items[0].Status.Succeeded()
		if cond == nil {
			return false
		}
		running = cond.Message
		return cond.Status != corev1.ConditionUnknown || strings.Contains(running, "is running on cluster "+realstack.MultiKueueWorker)
	}, timeout, interval)
	assert.Contains(t, running, "is running on cluster "+realstack.MultiKueueWorker+" (MultiKueue)")

	tektonharness.WaitPipelineRun(t, tk.Client, ns, "run", "True", "Succeeded", timeout)
	runs := tektonharness.CustomRuns(t, t, tk.Client, ns)
	require.Len(t, runs, 1)
	res := map[string]string{}
	for _, r := range runs[0].Status.Results {
		res[r.Name] = r.Value
	}
	assert.Equal(t, "Succeeded", res[trainjob.OutPhase])
	assert.Equal(t, realstack.MultiKueueWorker, res[trainjob.OutCluster])
	assert.Equal(t, trainjob.Undelivered, res[trainjob.OutUndelivered])
	assert.Equal(t, "", res[trainjob.OutResult])
}
