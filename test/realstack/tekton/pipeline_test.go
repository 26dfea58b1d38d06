package tekton_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
	"github.com/trainstep/trainstep/test/internal/realstack"
	"github.com/trainstep/trainstep/test/internal/tektonharness"
)

// Waits poll with these bounds; nothing sleeps to synchronise. Generous: the stack and both
// controllers share 2 cores, and kwok's stages have delays of a few seconds each.
const (
	timeout  = 3 * time.Minute
	interval = 200 * time.Millisecond
)

// pipelineRun creates PipelineRun "run" in ns: one trainstep task whose whole step is the step
// param (YAML), its results those of the Pipeline.
func pipelineRun(t *testing.T, ns, step string) {
	t.Helper()
	tektonharness.CreateStepPipelineRun(t, c, ns, "run", step)
}

// customRun is the namespace's one CustomRun (Tekton's controller creates it).
func customRun(ct require.TestingT, t *testing.T, ns string) *v1beta1.CustomRun {
	runs := tektonharness.CustomRuns(ct, t, c, ns)
	require.Len(ct, runs, 1)
	return &runs[0]
}

func results(run *v1beta1.CustomRun) map[string]string {
	out := map[string]string{}
	for _, r := range run.Status.Results {
		out[r.Name] = r.Value
	}
	return out
}

// TestTorchStepSucceedsThroughTheRealTrainer: a 2-node torch step goes through the Trainer's
// and JobSet's webhooks and controllers, the Job controller and the scheduler onto kwok Nodes;
// the CustomRun succeeds with trainstep's results, and they reach the PipelineRun's.
func TestTorchStepSucceedsThroughTheRealTrainer(t *testing.T) {
	dumpOnFailure(t)
	ns := stack.Namespace(t)
	pipelineRun(t, ns, `
framework: torch
trainer:
  numNodes: 2
  env: {KWOK_RUN_SECONDS: "2"}
  func: |
    def train():
        print("hello from the real stack")
`)
	pr := tektonharness.WaitPipelineRun(t, c, ns, "run", "True", "Succeeded", timeout)
	run := customRun(t, t, ns)
	res := results(run)
	name := res[trainjob.OutName]
	require.NotEmpty(t, name, "results: %v", res)
	assert.Equal(t, "Succeeded", res[trainjob.OutPhase])
	assert.Equal(t, "2", res[trainjob.OutNumNodes])
	assert.Equal(t, "torch-distributed", res[trainjob.OutRuntime])
	prResults, _, _ := unstructured.NestedSlice(pr.Object, "status", "results")
	got := map[string]string{}
	for _, r := range prResults {
		m, _ := r.(map[string]any)
		got[m["name"].(string)], _ = m["value"].(string)
	}
	assert.Equal(t, map[string]string{"trainjob-name": name, "phase": "Succeeded", "num-nodes": "2"}, got)

	// The real Trainer says Complete, and its pods were Job pods of the JobSet on kwok Nodes.
	tj := &trainer.TrainJob{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, tj))
	assert.True(t, meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete), "%+v", tj.Status.Conditions)
	assert.Equal(t, run.UID, tj.OwnerReferences[0].UID, "the CustomRun owns the TrainJob")
	pods := &corev1.PodList{}
	require.NoError(t, c.List(t.Context(), pods, client.InNamespace(ns), client.MatchingLabels{"jobset.sigs.k8s.io/jobset-name": name}))
	require.Len(t, pods.Items, 2)
	for _, p := range pods.Items {
		assert.Contains(t, stack.Nodes, p.Spec.NodeName, "pod %s", p.Name)
		assert.Equal(t, corev1.PodSucceeded, p.Status.Phase, "pod %s", p.Name)
	}
}

// TestFailedNodeCarriesTheTrainersReasonAndTraceback: a node exits 1 (no Job retries); the
// CustomRun fails with the Trainer's own reason and the traceback read through pods/log.
func TestFailedNodeCarriesTheTrainersReasonAndTraceback(t *testing.T) {
	dumpOnFailure(t)
	ns := stack.Namespace(t)
	rt := stack.InstallNoRetryRuntime(t)
	traceback := []string{
		"Traceback (most recent call last):",
		`  File "train.py", line 7, in train`,
		"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
	}
	stack.SetNodeLog(t, traceback...)
	pipelineRun(t, ns, `
framework: torch
runtime: {name: `+rt+`, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 2
  env: {KWOK_FAIL: "1"}
  func: |
    def train():
        raise SystemExit(1)
`)
	tektonharness.WaitPipelineRun(t, c, ns, "run", "False", "Failed", timeout)
	run := customRun(t, t, ns)
	cond := run.Status.Succeeded()
	require.NotNil(t, cond)
	t.Logf("CustomRun %s: %s", cond.Reason, cond.Message)

	tjs := &trainer.TrainJobList{}
	require.NoError(t, c.List(t.Context(), tjs, client.InNamespace(ns)))
	require.Len(t, tjs.Items, 1)
	failed := meta.FindStatusCondition(tjs.Items[0].Status.Conditions, trainer.TrainJobFailed)
	require.NotNil(t, failed, "the Trainer must mark the TrainJob Failed: %+v", tjs.Items[0].Status.Conditions)
	assert.Equal(t, "False", string(cond.Status))
	assert.Equal(t, failed.Reason, cond.Reason, "the Trainer's own reason")
	assert.Contains(t, cond.Message, failed.Message, "the Trainer's own message")
	assert.Contains(t, cond.Message, "last lines of")
	for _, line := range traceback {
		assert.Contains(t, cond.Message, line)
	}
}

// TestUnschedulableStepSaysWhyThenFailsAtStartTimeout: a pod no Node can hold; while it waits
// the CustomRun's Succeeded=Unknown message gives the scheduler's reason, and startTimeout fails
// the run and deletes the TrainJob.
func TestUnschedulableStepSaysWhyThenFailsAtStartTimeout(t *testing.T) {
	dumpOnFailure(t)
	ns := stack.Namespace(t)
	pipelineRun(t, ns, fmt.Sprintf(`
framework: torch
trainer:
  numNodes: 1
  resourcesPerNode: {gpu: %d}
  func: |
    def train():
        pass
startTimeout: 10s
`, realstack.NodeGPUs*2))

	var waiting string
	require.Eventually(t, func() bool {
		runs := &v1beta1.CustomRunList{}
		if c.List(t.Context(), runs, client.InNamespace(ns)) != nil || len(runs.Items) != 1 {
			return false
		}
		cond := runs.Items[0].Status.Succeeded()
		if cond == nil {
			return false
		}
		if cond.Status == corev1.ConditionUnknown {
			waiting = cond.Message
		}
		return cond.Status != corev1.ConditionUnknown || strings.Contains(waiting, "Insufficient nvidia.com/gpu")
	}, timeout, 50*time.Millisecond)
	t.Logf("while waiting: %s", waiting)
	assert.Contains(t, waiting, "Insufficient nvidia.com/gpu", "the running CustomRun says why, in the scheduler's words")

	tektonharness.WaitPipelineRun(t, c, ns, "run", "False", "Failed", timeout)
	cond := customRun(t, t, ns).Status.Succeeded()
	require.NotNil(t, cond)
	assert.Equal(t, trainjob.ReasonStartTimeout, cond.Reason)
	assert.Contains(t, cond.Message, "did not start within 10s (startTimeout)")
	assert.Contains(t, cond.Message, "Insufficient nvidia.com/gpu")
	require.Eventually(t, func() bool {
		l := &trainer.TrainJobList{}
		return c.List(t.Context(), l, client.InNamespace(ns)) == nil && len(l.Items) == 0
	}, timeout, interval, "the TrainJob must be deleted")
}
