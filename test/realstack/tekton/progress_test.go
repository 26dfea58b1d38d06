package tekton_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/trainstep/trainstep/test/internal/tektonharness"
)

// TestProgressFromTheStatusServerReachesTheRun: rank 0 posts progress and metrics to the
// Trainer's status server with what the Trainer injected into its pod; the CustomRun's running
// message shows what the server wrote, and the final metrics are results metric-<name> that
// reach the PipelineRun.
func TestProgressFromTheStatusServerReachesTheRun(t *testing.T) {
	dumpOnFailure(t)
	ns := stack.Namespace(t)
	tektonharness.CreatePipelineRun(t, c, ns, `
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
          framework: torch
          trainer:
            numNodes: 2
            env: {KWOK_HOLD: "1"}
            func: |
              def train():
                  print("training")
    results:
    - {name: loss, value: $(tasks.train.results.metric-loss)}
    - {name: f1, value: $(tasks.train.results.metric-eval-f1)}
`)
	rank0 := stack.Rank0(t, ns, "")
	require.NoError(t, rank0.Report(t.Context(), ptr.To[int32](42), ptr.To[int32](720), [2]string{"loss", "0.31"}, [2]string{"acc", "0.88"}))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		run := customRun(ct, t, ns)
		cond := run.Status.Succeeded()
		require.NotNil(ct, cond)
		assert.Equal(ct, "Unknown", string(cond.Status))
		assert.Contains(ct, cond.Message, "2/2 nodes · 42% · 12m left · loss=0.31 acc=0.88")
	}, timeout, interval)

	require.NoError(t, rank0.Report(t.Context(), ptr.To[int32](100), nil, [2]string{"loss", "0.12"}, [2]string{"eval/f1", "0.7"}))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		cond := customRun(ct, t, ns).Status.Succeeded()
		require.NotNil(ct, cond)
		assert.Contains(ct, cond.Message, "100% · loss=0.12 eval/f1=0.7")
	}, timeout, interval)
	require.NoError(t, stack.Release(t.Context(), ns, ""))
	pr := tektonharness.WaitPipelineRun(t, c, ns, "run", "True", "Succeeded", timeout)
	res := results(customRun(t, t, ns))
	assert.Equal(t, "0.12", res["metric-loss"])
	assert.Equal(t, "0.7", res["metric-eval-f1"])
	assert.JSONEq(t, `{"loss":"0.12","eval/f1":"0.7"}`, res["metrics"])
	got := pipelineResults(pr)
	assert.Equal(t, map[string]string{"loss": "0.12", "f1": "0.7"}, got)
}

// pipelineResults are a PipelineRun's results by name.
func pipelineResults(pr *unstructured.Unstructured) map[string]string {
	list, _, _ := unstructured.NestedSlice(pr.Object, "status", "results")
	got := map[string]string{}
	for _, r := range list {
		m, _ := r.(map[string]any)
		name, _ := m["name"].(string)
		got[name], _ = m["value"].(string)
	}
	return got
}
