package kueue_test

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/test/internal/realstack"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// The real Kueue (test/internal/realstack/kueue.go) in front of the real Trainer. Each test has
// its own ClusterQueue of realstack.NodeGPUs GPUs (one Node's worth), so a job of all of them
// leaves the next one queued. Sequential: Kueue's quota is not the Nodes' capacity, and a pod
// left Pending by other tests' GPUs would be evicted by waitForPodsReady, changing the counts
// these tests assert.

// workloads lists the Workloads of namespace ns.
func workloads(t *testing.T, ns string) []unstructured.Unstructured {
	t.Helper()
	l := trainjob.NewWorkloadList()
	require.NoError(t, stack.Client.List(t.Context(), l, client.InNamespace(ns)))
	return l.Items
}

// queuedStep is a one-node step in the test's LocalQueue asking for every GPU of its queue.
func queuedStep(queue string, runSeconds int, extra string) string {
	return fmt.Sprintf(`
framework: torch
queueName: %s
trainer:
  numNodes: 1
  resourcesPerNode: {gpu: %d}
  env: {KWOK_RUN_SECONDS: "%d"}
  func: |
    def train():
        pass
timeout: 3m
%s`, queue, realstack.NodeGPUs, runSeconds, extra)
}

// Kueue's webhook is called: a TrainJob created with a queue label and no spec.suspend comes back
// suspended, and Kueue's controller makes a Workload owned by it and admits it (the queue is free).
func TestKueueSuspendsAQueuedTrainJobAtCreation(t *testing.T) {
	ns := stack.Namespace(t)
	q := stack.KueueQueue(t, ns, realstack.NodeGPUs)
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "queued", Labels: map[string]string{trainjob.LabelKueueQueue: q}},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed", Kind: ptr.To(trainer.ClusterTrainingRuntimeKind), APIGroup: ptr.To(trainer.GroupVersion.Group)},
			Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](1), ResourcesPerNode: &corev1.ResourceRequirements{
				Limits: corev1.ResourceList{realstack.GPUResource: resource.MustParse("1")}}},
		},
	}
	require.Nil(t, tj.Spec.Suspend)
	require.NoError(t, stack.Client.Create(t.Context(), tj))
	assert.Equal(t, ptr.To(true), tj.Spec.Suspend, "Kueue's mutating webhook suspends a queued TrainJob at creation")
	require.Eventually(t, func() bool {
		w := trainjob.WorkloadOf(tj, workloads(t, ns))
		return w != nil && w.Admitted && w.ClusterQueue == q
	}, timeout, interval, "Kueue makes a Workload owned by the TrainJob and admits it")
	require.Eventually(t, func() bool {
		got := &trainer.TrainJob{}
		require.NoError(t, stack.Client.Get(t.Context(), client.ObjectKeyFromObject(tj), got))
		return !ptr.Deref(got.Spec.Suspend, true)
	}, timeout, interval, "Kueue resumes the admitted TrainJob")
}

// A queue with no free quota: the step waits in it longer than its startTimeout, says where it is
// and why in Kueue's words, and once admitted completes: startTimeout counts from the admission,
// not from the TrainJob's creation. The queue wait is an output.
func TestKueueQueuedStepIsNotFailedByStartTimeoutAndCompletes(t *testing.T) {
	ns := stack.Namespace(t)
	q := stack.KueueQueue(t, ns, realstack.NodeGPUs)
	const startTimeout = 20 * time.Second
	stack.KueueBlocker(t, ns, q, realstack.NodeGPUs, 45, "")

	r := executor(t, ns, queuedStep(q, 1, "startTimeout: 20s\n"))
	t.Logf("stderr:\n%s", r.Stderr)
	require.Equal(t, cli.ExitSucceeded, r.Code)
	assert.Equal(t, "Succeeded", r.Outputs["phase"])
	assert.Contains(t, r.Stderr, "Suspended: TrainJob "+r.Outputs["trainjob-name"]+" is queued in LocalQueue "+q+" (Workload ")
	assert.Contains(t, r.Stderr, "waiting: couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu in flavor "+realstack.KueueFlavor+", 8 more needed")
	wait, err := strconv.Atoi(r.Outputs["queue-wait-seconds"])
	require.NoError(t, err, "queue-wait-seconds: %q", r.Outputs["queue-wait-seconds"])
	// The premise: it waited in the queue for longer than its startTimeout.
	assert.Greater(t, wait, int(startTimeout.Seconds()))
	assert.Equal(t, "0", r.Outputs["preemptions"])
}

// A running low-priority step is preempted by a high-priority TrainJob in its ClusterQueue: its
// TrainJob is suspended and its pods deleted; the step says so in Kueue's words, keeps waiting
// (no startTimeout, no missing-pod failure), and completes when Kueue admits it again. The
// preemption is counted in the outputs.
func TestKueuePreemptedStepIsRequeuedAndCompletes(t *testing.T) {
	ns := stack.Namespace(t)
	q := stack.KueueQueue(t, ns, realstack.NodeGPUs)
	low := startExecutor(t, ns, queuedStep(q, 20, fmt.Sprintf("startTimeout: 30s\nlabels: {kueue.x-k8s.io/priority-class: %s}\n", realstack.KueueLowPriority)))
	require.Eventually(t, func() bool { return low.Exited() || strings.Contains(low.Stderr.String(), "is running: 1/1 nodes") },
		timeout, interval, "the low-priority step must run")
	require.False(t, low.Exited(), "stderr:\n%s", low.Stderr.String())

	high := executor(t, ns, queuedStep(q, 1, fmt.Sprintf("labels: {kueue.x-k8s.io/priority-class: %s}\n", realstack.KueueHighPriority)))
	require.Equal(t, cli.ExitSucceeded, high.Code, "stderr:\n%s", high.Stderr)

	r := low.Result(t)
	t.Logf("stderr:\n%s", r.Stderr)
	require.Equal(t, cli.ExitSucceeded, r.Code)
	assert.Equal(t, "Succeeded", r.Outputs["phase"])
	assert.Contains(t, r.Stderr, "Suspended: TrainJob "+r.Outputs["trainjob-name"]+" was preempted by Kueue (InClusterQueue): ")
	assert.Contains(t, r.Stderr, "; requeued in LocalQueue "+q)
	assert.Equal(t, "1", r.Outputs["preemptions"])
	assert.Equal(t, "1", r.Outputs["evictions"])
}

// An admitted step whose pods are not Ready within Kueue's waitForPodsReady timeout is evicted
// (PodsReadyTimeout) and requeued; the step says so in Kueue's words, and completes once
// admitted again with pods that become Ready. Its pods are held back from Ready (env
// KWOK_HOLD_READY) until the test releases them: those of the second admission.
func TestKueueEvictedByWaitForPodsReadyIsRequeuedAndCompletes(t *testing.T) {
	ns := stack.Namespace(t)
	q := stack.KueueQueue(t, ns, realstack.NodeGPUs)
	run := startExecutor(t, ns, fmt.Sprintf(`
framework: torch
queueName: %s
trainer:
  numNodes: 1
  resourcesPerNode: {gpu: 1}
  env: {%s: "1"}
  func: |
    def train():
        pass
timeout: 3m
startTimeout: 1m
`, q, realstack.HoldReadyEnv))
	require.Eventually(t, func() bool {
		return run.Exited() || strings.Contains(run.Stderr.String(), "(PodsReadyTimeout)")
	}, timeout, interval, "Kueue must evict the step whose pods are not Ready")
	require.False(t, run.Exited(), "stderr:\n%s", run.Stderr.String())
	// The pods of the second admission (made after the TrainJob was resumed again) may run.
	require.Eventually(t, func() bool {
		tj := onlyTrainJob(t, ns)
		resumed := trainjob.LastResumed(tj)
		return run.Exited() || (!ptr.Deref(tj.Spec.Suspend, true) && tj.Status.Conditions != nil &&
			!resumed.IsZero() && resumed.After(tj.CreationTimestamp.Time) && stack.ReleaseHeldPods(t, ns, resumed) > 0)
	}, timeout, interval, "Kueue must admit the step again")

	r := run.Result(t)
	t.Logf("stderr:\n%s", r.Stderr)
	require.Equal(t, cli.ExitSucceeded, r.Code)
	assert.Equal(t, "Succeeded", r.Outputs["phase"])
	assert.Contains(t, r.Stderr, "Suspended: TrainJob "+r.Outputs["trainjob-name"]+" was evicted by Kueue (PodsReadyTimeout): ")
	assert.Contains(t, r.Stderr, "; requeued in LocalQueue "+q)
	assert.Equal(t, "0", r.Outputs["preemptions"])
	assert.Equal(t, "1", r.Outputs["evictions"])
}

// A step whose pods never become Ready is evicted by waitForPodsReady, requeued once
// (KueueRequeuingLimit), evicted again, and then deactivated by Kueue: Kueue will not admit it
// again until someone activates its Workload, so the step ends Failed in Kueue's words and
// deletes its TrainJob instead of waiting forever as "suspended".
func TestKueueDeactivatedWorkloadEndsTheStep(t *testing.T) {
	ns := stack.Namespace(t)
	q := stack.KueueQueue(t, ns, realstack.NodeGPUs)
	r := executor(t, ns, fmt.Sprintf(`
framework: torch
queueName: %s
trainer:
  numNodes: 1
  resourcesPerNode: {gpu: 1}
  env: {%s: "1"}
  func: |
    def train():
        pass
`, q, realstack.HoldReadyEnv))
	t.Logf("stderr:\n%s", r.Stderr)
	require.Equal(t, cli.ExitFailed, r.Code)
	assert.Equal(t, "Failed", r.Outputs["phase"])
	assert.Equal(t, "DeactivatedDueToRequeuingLimitExceeded", r.Outputs["reason"])
	assert.Contains(t, r.Outputs["message"], "Kueue deactivated its Workload")
	assert.Contains(t, r.Outputs["message"], "exceeding the maximum number of re-queuing retries")
	assert.NotContains(t, r.Outputs["message"], "last lines of", "no pod's log explains a deactivation")
	require.Eventually(t, func() bool {
		return len(testenv.TrainJobs(t.Context(), t, stack.Client, ns)) == 0
	}, timeout, interval, "the TrainJob of a step that ended must be deleted")
}

// A step stopped while queued (SIGTERM, as Argo's stop and Tekton's cancel end the executor's
// pod) deletes its TrainJob, and with it Kueue's Workload: nothing is admitted later.
func TestKueueStepCancelledWhileQueuedLeavesNothing(t *testing.T) {
	ns := stack.Namespace(t)
	q := stack.KueueQueue(t, ns, 0) // never admits a GPU job
	run := startExecutor(t, ns, queuedStep(q, 1, ""))
	require.Eventually(t, func() bool {
		return run.Exited() || strings.Contains(run.Stderr.String(), "insufficient quota for nvidia.com/gpu")
	}, timeout, interval, "the step must say it is queued")
	require.False(t, run.Exited(), "stderr:\n%s", run.Stderr.String())
	require.Len(t, workloads(t, ns), 1)

	run.Signal(t, syscall.SIGTERM)
	r := run.Result(t)
	assert.Equal(t, cli.ExitInterrupts, r.Code, "stderr:\n%s", r.Stderr)
	require.Eventually(t, func() bool {
		return len(testenv.TrainJobs(t.Context(), t, stack.Client, ns)) == 0 && len(workloads(t, ns)) == 0
	}, timeout, interval, "the TrainJob and its Workload must be gone")
}
