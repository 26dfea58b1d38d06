package multikueue_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/test/internal/realstack"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// startTimeout bounds the time until a job starts, never a job that has: a worker pod evicted
// after the job started (JobSet counts a Job ready only while all its pods are, so none is
// ready while the replacement starts) past the step's startTimeout leaves the step Running,
// and it completes. Its pods are held from Ready (KWOK_HOLD_READY) until the test releases
// them, so the moment with no Job ready lasts until the step has said so.
func TestMultiKueueStartedStepOutlivesAWorkerPodRestart(t *testing.T) {
	t.Parallel()
	const startTimeout = 30 * time.Second
	ns := manager.Namespace(t)
	q := manager.MultiKueueQueue(t, worker, ns, realstack.NodeGPUs)
	run := manager.StartExecutor(t, bin, ns, fmt.Sprintf(`
framework: torch
queueName: %s
trainer:
  numNodes: 1
  resourcesPerNode: {gpu: 1}
  env: {KWOK_HOLD: "1", %s: "1"}
  func: |
    def train():
        pass
timeout: 5m
startTimeout: %s
`, q, realstack.HoldReadyEnv, startTimeout), 2*timeout)
	tj := onlyTrainJob(t, manager, ns)
	// The first pod on the worker becomes Ready: the job starts.
	require.Eventually(t, func() bool {
		return run.Exited() || worker.ReleaseHeldPods(t, ns, time.Time{}) > 0
	}, timeout, interval, "the job must reach the worker")
	require.Eventually(t, func() bool {
		return run.Exited() || strings.Contains(run.Stderr.String(), "is running on cluster "+realstack.MultiKueueWorker)
	}, timeout, interval, "the step must see the job running")
	// The eviction comes after the startTimeout would have passed, counted from any start.
	require.Eventually(t, func() bool {
		return run.Exited() || time.Since(tj.CreationTimestamp.Time) > startTimeout+5*time.Second
	}, 2*timeout, interval)
	require.False(t, run.Exited(), "stderr:\n%s", run.Stderr.String())
	node := workerNodePod(t, ns, tj.Name)
	evictedAt := time.Now()
	require.NoError(t, worker.Evict(t.Context(), ns, node.Name, "The node was low on resource: memory."))
	require.Eventually(t, func() bool {
		return run.Exited() || strings.Contains(run.Stderr.String(), "no job ready now")
	}, timeout, interval, "the step must say no job is ready, and wait")
	require.False(t, run.Exited(), "a started job is not failed by startTimeout; stderr:\n%s", run.Stderr.String())
	// The replacement becomes Ready (within the worker's waitForPodsReady), and finishes.
	require.Eventually(t, func() bool {
		return run.Exited() || worker.ReleaseHeldPods(t, ns, evictedAt.Add(-time.Second)) > 0
	}, timeout, interval, "the Job must replace the evicted pod")
	require.Eventually(t, func() bool {
		return run.Exited() || strings.Contains(lastLine(run.Stderr.String()), "jobs ready 1")
	}, timeout, interval, "the replacement must be ready")
	require.NoError(t, worker.Release(t.Context(), ns, tj.Name))

	r := run.Result(t)
	t.Logf("stderr:\n%s", r.Stderr)
	require.Equal(t, cli.ExitSucceeded, r.Code)
	assert.Equal(t, "Succeeded", r.Outputs[trainjob.OutPhase])
}

// A job that waits in the manager's queue longer than its startTimeout (the queue's GPU is
// taken) is not deleted the moment MultiKueue dispatches it: startTimeout counts from Kueue's
// admission, which the manager's Workload records (the manager's Trainer leaves MultiKueue jobs
// alone and never writes Suspended=False).
func TestMultiKueueStepQueuedLongerThanItsStartTimeoutCompletes(t *testing.T) {
	t.Parallel()
	const startTimeout = 30 * time.Second
	ns := manager.Namespace(t)
	q := manager.MultiKueueQueue(t, worker, ns, realstack.NodeGPUs)
	blocker := manager.KueueBlocker(t, ns, q, realstack.NodeGPUs, 50, "")
	r := manager.StartExecutor(t, bin, ns, fmt.Sprintf(`
framework: torch
queueName: %s
trainer:
  numNodes: 1
  resourcesPerNode: {gpu: 1}
  env: {KWOK_RUN_SECONDS: "10"}
  func: |
    def train():
        pass
timeout: 6m
startTimeout: %s
`, q, startTimeout), 2*timeout).Result(t)
	t.Logf("stderr:\n%s", r.Stderr)
	require.Equal(t, cli.ExitSucceeded, r.Code)
	assert.Equal(t, "Succeeded", r.Outputs[trainjob.OutPhase])
	wait, err := time.ParseDuration(r.Outputs[trainjob.OutQueueWait] + "s")
	require.NoError(t, err, "the step says how long it waited in the manager's queue")
	assert.Greater(t, wait, startTimeout, "the step waited in the queue (behind %s) longer than its startTimeout", blocker.Name)
}

// onlyTrainJob waits for the one TrainJob of namespace ns on s.
func onlyTrainJob(t *testing.T, s *realstack.Stack, ns string) *trainer.TrainJob {
	t.Helper()
	var tj trainer.TrainJob
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		l := testenv.TrainJobs(t.Context(), c, s.Client, ns)
		if assert.Len(c, l, 1) {
			tj = l[0]
		}
	}, timeout, interval)
	return &tj
}

// workerNodePod is the running node-0 pod of TrainJob name on the worker.
func workerNodePod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		pods := &corev1.PodList{}
		require.NoError(c, worker.Client.List(t.Context(), pods, client.InNamespace(ns), client.MatchingLabels{
			trainjob.LabelJobSetName: name, trainjob.LabelReplicatedJob: trainjob.NodeJob,
		}))
		var running []corev1.Pod
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running = append(running, p)
			}
		}
		if assert.Len(c, running, 1) {
			pod = running[0]
		}
	}, timeout, interval)
	return &pod
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
