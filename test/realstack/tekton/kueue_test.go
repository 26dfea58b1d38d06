package tekton_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/realstack"
	"github.com/trainstep/trainstep/test/internal/tektonharness"
)

// The Tekton face under the real Kueue: a step whose queue has no free quota waits in it longer
// than its startTimeout; the running CustomRun says where it is and why in Kueue's words, and
// succeeds once admitted (startTimeout counts from the admission), with the queue wait as a
// result. The controller watches Workloads with manifests/tekton's RBAC.
func TestKueueQueuedStepSucceedsPastItsStartTimeout(t *testing.T) {
	dumpOnFailure(t)
	ns := stack.Namespace(t)
	q := stack.KueueQueue(t, ns, realstack.NodeGPUs)
	stack.KueueBlocker(t, ns, q, realstack.NodeGPUs, 45, "")
	pipelineRun(t, ns, fmt.Sprintf(`
framework: torch
queueName: %s
trainer:
  numNodes: 1
  resourcesPerNode: {gpu: %d}
  func: |
    def train():
        pass
startTimeout: 20s
`, q, realstack.NodeGPUs))
	const want = "insufficient unused quota for nvidia.com/gpu in flavor " + realstack.KueueFlavor
	waiting, ok := waitingMessage(t, ns, func(m string) bool { return strings.Contains(m, want) })
	require.True(t, ok, "the run ended before saying why it waits: %s", waiting)
	assert.Contains(t, waiting, " is queued in LocalQueue "+q+" (Workload ")

	tektonharness.WaitPipelineRun(t, c, ns, "run", "True", "Succeeded", timeout)
	res := results(customRun(t, t, ns))
	assert.Equal(t, "Succeeded", res[trainjob.OutPhase])
	wait, err := strconv.Atoi(res[trainjob.OutQueueWait])
	require.NoError(t, err, "results: %v", res)
	assert.Greater(t, wait, 20, "the premise: it waited in the queue longer than its startTimeout")
	assert.Equal(t, "0", res[trainjob.OutPreemptions])
}

// A running low-priority step is preempted by a high-priority TrainJob: the waiting CustomRun
// says so in Kueue's words, requeued, and succeeds once admitted again, with the preemption
// counted.
func TestKueuePreemptedStepIsRequeuedAndSucceeds(t *testing.T) {
	dumpOnFailure(t)
	ns := stack.Namespace(t)
	q := stack.KueueQueue(t, ns, realstack.NodeGPUs)
	pipelineRun(t, ns, fmt.Sprintf(`
framework: torch
queueName: %s
labels: {%s: %s}
trainer:
  numNodes: 1
  resourcesPerNode: {gpu: %d}
  env: {KWOK_RUN_SECONDS: "20"}
  func: |
    def train():
        pass
`, q, realstack.KueuePriorityLabel, realstack.KueueLowPriority, realstack.NodeGPUs))
	running, ok := waitingMessage(t, ns, func(m string) bool { return strings.Contains(m, "is running: 1/1 nodes") })
	require.True(t, ok, "the run ended before running: %s", running)

	stack.KueueBlocker(t, ns, q, realstack.NodeGPUs, 10, realstack.KueueHighPriority)
	preempted, ok := waitingMessage(t, ns, func(m string) bool { return strings.Contains(m, "; requeued in LocalQueue") })
	require.True(t, ok, "the run ended before saying it was preempted: %s", preempted)
	assert.Contains(t, preempted, " was preempted by Kueue (InClusterQueue): ")
	assert.Contains(t, preempted, "; requeued in LocalQueue "+q)

	tektonharness.WaitPipelineRun(t, c, ns, "run", "True", "Succeeded", timeout)
	assert.Equal(t, "1", results(customRun(t, t, ns))[trainjob.OutPreemptions])
}

// A PipelineRun cancelled while its step waits in the queue: the TrainJob is deleted, and with
// it Kueue's Workload; nothing is admitted later.
func TestKueueCancelledWhileQueuedLeavesNothing(t *testing.T) {
	dumpOnFailure(t)
	ns := stack.Namespace(t)
	q := stack.KueueQueue(t, ns, 0) // never admits a GPU job
	pipelineRun(t, ns, fmt.Sprintf(`
framework: torch
queueName: %s
trainer:
  numNodes: 1
  resourcesPerNode: {gpu: 1}
  func: |
    def train():
        pass
`, q))
	queued, ok := waitingMessage(t, ns, func(m string) bool { return strings.Contains(m, "insufficient quota for nvidia.com/gpu") })
	require.True(t, ok, "the run ended before saying it is queued: %s", queued)
	// Tekton cancels only the children recorded in status.childReferences.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		refs, _, _ := unstructured.NestedSlice(tektonharness.GetPipelineRun(ct, t, c, ns, "run").Object, "status", "childReferences")
		assert.Len(ct, refs, 1)
	}, timeout, interval)
	pr := tektonharness.GetPipelineRun(t, t, c, ns, "run")
	require.NoError(t, c.Patch(t.Context(), pr, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"status":"Cancelled"}}`))))
	tektonharness.WaitPipelineRun(t, c, ns, "run", "False", "Cancelled", timeout)
	require.Eventually(t, func() bool {
		l := trainjob.NewWorkloadList()
		tjs := &trainer.TrainJobList{}
		return c.List(t.Context(), tjs, client.InNamespace(ns)) == nil && len(tjs.Items) == 0 &&
			c.List(t.Context(), l, client.InNamespace(ns)) == nil && len(l.Items) == 0
	}, timeout, interval, "the TrainJob and its Workload must be gone")
}

// An admitted step whose pods are not Ready within Kueue's waitForPodsReady timeout is evicted
// (PodsReadyTimeout) and requeued; the waiting CustomRun says so in Kueue's words, and the run
// succeeds once admitted again with pods that become Ready (realstack.HoldReadyEnv).
func TestKueueEvictedByWaitForPodsReadyIsRequeuedAndSucceeds(t *testing.T) {
	dumpOnFailure(t)
	ns := stack.Namespace(t)
	q := stack.KueueQueue(t, ns, realstack.NodeGPUs)
	pipelineRun(t, ns, fmt.Sprintf(`
framework: torch
queueName: %s
trainer:
  numNodes: 1
  resourcesPerNode: {gpu: 1}
  env: {%s: "1"}
  func: |
    def train():
        pass
startTimeout: 1m
`, q, realstack.HoldReadyEnv))
	evicted, ok := waitingMessage(t, ns, func(m string) bool { return strings.Contains(m, "(PodsReadyTimeout)") })
	require.True(t, ok, "the run ended before Kueue evicted it: %s", evicted)
	assert.Contains(t, evicted, " was evicted by Kueue (PodsReadyTimeout): ")
	releaseReadmitted(t, ns)
	tektonharness.WaitPipelineRun(t, c, ns, "run", "True", "Succeeded", timeout)
	res := results(customRun(t, t, ns))
	assert.Equal(t, "1", res[trainjob.OutEvictions])
	assert.Equal(t, "0", res[trainjob.OutPreemptions])
}

// releaseReadmitted lets the held pods of the namespace's one TrainJob become Ready once Kueue
// has admitted it again: those made after its last resume.
func releaseReadmitted(t *testing.T, ns string) {
	t.Helper()
	require.Eventually(t, func() bool {
		tjs := &trainer.TrainJobList{}
		if c.List(t.Context(), tjs, client.InNamespace(ns)) != nil || len(tjs.Items) != 1 {
			return false
		}
		tj := &tjs.Items[0]
		resumed := trainjob.LastResumed(tj)
		return tj.Spec.Suspend != nil && !*tj.Spec.Suspend && resumed.After(tj.CreationTimestamp.Time) &&
			stack.ReleaseHeldPods(t, ns, resumed) > 0
	}, timeout, interval, "Kueue must admit the step again")
}
