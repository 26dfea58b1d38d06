package tekton_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
	"github.com/trainstep/trainstep/test/internal/tektonharness"
	"github.com/trainstep/trainstep/test/internal/testenv"
	"github.com/trainstep/trainstep/test/internal/trainersim"
)

// e2eTimeout allows for the Tekton controller's start-up and two real (local) training runs.
const e2eTimeout = 3 * testenv.Timeout

func pipelineRun(t *testing.T, ns, y string) *unstructured.Unstructured {
	t.Helper()
	return tektonharness.CreatePipelineRun(t, c, ns, y)
}

func getPR(ct require.TestingT, t *testing.T, ns, name string) *unstructured.Unstructured {
	return tektonharness.GetPipelineRun(ct, t, c, ns, name)
}

func waitPR(t *testing.T, ns, name, wantStatus, wantReason string) *unstructured.Unstructured {
	t.Helper()
	return tektonharness.WaitPipelineRun(t, c, ns, name, wantStatus, wantReason, e2eTimeout)
}

const ref = tektonharness.Ref

// A Pipeline of custom tasks only: train (xgboost, really run) → a second trainstep step fed by
// the first one's results → a finally task; results flow task to task and into the Pipeline's.
func TestPipelineResultsFlow(t *testing.T) {
	t.Parallel()
	dumpOnFailure(t)
	ns := env.Namespace(t)
	pipelineRun(t, ns, `
apiVersion: tekton.dev/v1
kind: PipelineRun
metadata: {name: flow}
spec:
  params: [{name: epochs, value: "3"}]
  pipelineSpec:
    params: [{name: epochs, type: string}]
    tasks:
    - name: train
      taskRef: `+ref+`
      params:
      - {name: framework, value: xgboost}
      - {name: trainer.numNodes, value: "2"}
      - {name: trainer.funcArgs.epochs, value: $(params.epochs)}
      - name: trainer.func
        value: |
          def train(epochs):
              import os
              print(f"worker {os.environ['DMLC_TASK_ID']} trained {epochs} epochs")
    - name: second
      taskRef: `+ref+`
      params:
      - {name: framework, value: jax}
      - {name: trainer.funcArgs.upstream, value: $(tasks.train.results.trainjob-name)}
      - {name: labels.upstream-phase, value: $(tasks.train.results.phase)}
      - name: trainer.func
        value: |
          def train(upstream):
              print(f"evaluating the model of {upstream}")
    finally:
    - name: report
      taskRef: `+ref+`
      params:
      - {name: framework, value: jax}
      - {name: trainer.func, value: "def report(): pass"}
      - {name: labels.sim-mode, value: succeed}
      - {name: labels.first-nodes, value: $(tasks.train.results.num-nodes)}
    results:
    - {name: trained-by, value: $(tasks.train.results.trainjob-name)}
    - {name: evaluated-by, value: $(tasks.second.results.trainjob-name)}
`)
	pr := waitPR(t, ns, "flow", "True", "Succeeded")

	runs := &v1beta1.CustomRunList{}
	require.NoError(t, c.List(t.Context(), runs, client.InNamespace(ns)))
	require.Len(t, runs.Items, 3)
	jobOf := map[string]string{}
	for _, r := range runs.Items {
		task := r.Labels["tekton.dev/pipelineTask"]
		for _, res := range r.Status.Results {
			if res.Name == trainjob.OutName {
				jobOf[task] = res.Value
			}
		}
	}
	require.Len(t, jobOf, 3, "every task reports its TrainJob: %v", jobOf)

	prResults, _, _ := unstructured.NestedSlice(pr.Object, "status", "results")
	got := map[string]string{}
	for _, r := range prResults {
		m, _ := r.(map[string]any)
		got[m["name"].(string)], _ = m["value"].(string)
	}
	assert.Equal(t, jobOf["train"], got["trained-by"])
	assert.Equal(t, jobOf["second"], got["evaluated-by"])

	// The first task's results reached the second task's TrainJob and its real output.
	tjs := testenv.TrainJobs(t.Context(), t, c, ns)
	byName := map[string]int{}
	for i, tj := range tjs {
		byName[tj.Name] = i
	}
	second := tjs[byName[jobOf["second"]]]
	assert.Equal(t, "Succeeded", second.Labels["upstream-phase"])
	report := tjs[byName[jobOf["report"]]]
	assert.Equal(t, "2", report.Labels["first-nodes"])
	out, err := sim.Logs.Tail(t.Context(), ns, trainersim.PodName(second.Name, 0), trainjob.NodeContainer, 20)
	require.NoError(t, err)
	assert.Contains(t, out, "evaluating the model of "+jobOf["train"])
	out, err = sim.Logs.Tail(t.Context(), ns, trainersim.PodName(jobOf["train"], 1), trainjob.NodeContainer, 20)
	require.NoError(t, err)
	assert.Contains(t, out, "worker 1 trained 3 epochs")
}

const holdPipeline = `
apiVersion: tekton.dev/v1
kind: PipelineRun
metadata: {name: %s}
spec:
  %s
  pipelineSpec:
    tasks:
    - name: train
      taskRef: ` + ref + `
      params:
      - {name: framework, value: jax}
      - {name: trainer.func, value: "def train(): pass"}
      - {name: labels.sim-mode, value: hold}
`

func holdRun(name, extra string) string {
	return strings.Replace(strings.Replace(holdPipeline, "%s", name, 1), "%s", extra, 1)
}

func waitTrainJob(t *testing.T, ns string) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Len(ct, testenv.TrainJobs(t.Context(), ct, c, ns), 1)
	}, e2eTimeout, testenv.Interval)
}

func waitNoTrainJob(t *testing.T, ns string) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Empty(ct, testenv.TrainJobs(t.Context(), ct, c, ns))
	}, e2eTimeout, testenv.Interval)
}

func customRunReason(t *testing.T, ns string) (string, string) {
	t.Helper()
	runs := &v1beta1.CustomRunList{}
	require.NoError(t, c.List(t.Context(), runs, client.InNamespace(ns)))
	require.Len(t, runs.Items, 1)
	cond := runs.Items[0].Status.Succeeded()
	require.NotNil(t, cond)
	return cond.Reason, runs.Items[0].Spec.StatusMessage
}

func TestCancelledPipelineRunLeavesNoTrainJob(t *testing.T) {
	t.Parallel()
	dumpOnFailure(t)
	ns := env.Namespace(t)
	pr := pipelineRun(t, ns, holdRun("cancel", ""))
	waitTrainJob(t, ns)
	// Tekton cancels only the children recorded in status.childReferences (cancel.go), which it
	// writes after creating the CustomRun; a cancel before that leaves the CustomRun running.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		refs, _, _ := unstructured.NestedSlice(getPR(ct, t, ns, "cancel").Object, "status", "childReferences")
		assert.Len(ct, refs, 1)
	}, e2eTimeout, testenv.Interval)
	require.NoError(t, c.Patch(t.Context(), pr, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"status":"Cancelled"}}`))))
	waitPR(t, ns, "cancel", "False", "Cancelled")
	waitNoTrainJob(t, ns)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		reason, msg := customRunReason(t, ns)
		assert.Equal(ct, tekton.ReasonCancelled, reason)
		assert.Equal(ct, v1beta1.CancelledByPipelineMsg, msg)
	}, e2eTimeout, testenv.Interval)
}

func TestTimedOutPipelineRunLeavesNoTrainJob(t *testing.T) {
	t.Parallel()
	dumpOnFailure(t)
	ns := env.Namespace(t)
	pipelineRun(t, ns, holdRun("timeout", "timeouts: {pipeline: 8s}"))
	waitTrainJob(t, ns)
	waitPR(t, ns, "timeout", "False", "PipelineRunTimeout")
	waitNoTrainJob(t, ns)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		reason, msg := customRunReason(t, ns)
		assert.Equal(ct, tekton.ReasonCancelled, reason)
		assert.Equal(ct, v1beta1.TimedOutByPipelineMsg, msg)
	}, e2eTimeout, testenv.Interval)
}
