package multikueue_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/test/internal/realstack"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

const (
	timeout  = 3 * time.Minute
	interval = 200 * time.Millisecond
)

// executor runs the real binary against the manager to its end, as a pipeline step on the
// manager would.
func executor(t *testing.T, ns, step string) realstack.ExecutorResult {
	t.Helper()
	return manager.StartExecutor(t, bin, ns, step, timeout).Result(t)
}

// A step on the manager is dispatched to the worker and completes there. On the manager the
// step reports Running from the status MultiKueue mirrors (there are no pods on the manager),
// names the worker cluster, and its startTimeout (shorter than the job's run) never deletes the
// running remote job; the outputs say what stays on the worker's pods.
func TestMultiKueueStepRunsOnTheWorkerAndCompletes(t *testing.T) {
	t.Parallel() // a namespace and queue of its own on each cluster, 1 GPU
	ns := manager.Namespace(t)
	q := manager.MultiKueueQueue(t, worker, ns, realstack.NodeGPUs)
	r := executor(t, ns, fmt.Sprintf(`
framework: torch
queueName: %s
trainer:
  numNodes: 1
  resourcesPerNode: {gpu: 1}
  env: {KWOK_RUN_SECONDS: "30"}
  func: |
    def train():
        return {"loss": 0.1}
timeout: 3m
startTimeout: 20s
`, q))
	t.Logf("stderr:\n%s", r.Stderr)
	require.Equal(t, cli.ExitSucceeded, r.Code)
	name := r.Outputs[trainjob.OutName]
	assert.Equal(t, "Succeeded", r.Outputs[trainjob.OutPhase])
	assert.Contains(t, r.Stderr, "Running: TrainJob "+name+" is running on cluster "+realstack.MultiKueueWorker+" (MultiKueue)")
	assert.Equal(t, realstack.MultiKueueWorker, r.Outputs[trainjob.OutCluster])
	assert.Contains(t, r.Outputs[trainjob.OutMessage], "MultiKueue")
	assert.Equal(t, "", r.Outputs[trainjob.OutResult])
	assert.Equal(t, "result, log", r.Outputs[trainjob.OutUndelivered])

	// The manager's TrainJob was Kueue's (managedBy), its Complete condition is the worker's
	// (mirrored), and the manager made no pods for it. (Kueue deletes the worker's copy once the
	// job is finished; the cancel test sees it while it runs.)
	local := &trainer.TrainJob{}
	require.NoError(t, manager.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, local))
	assert.Equal(t, trainjob.ManagedByMultiKueue, ptr.Deref(local.Spec.ManagedBy, ""))
	assert.True(t, meta.IsStatusConditionTrue(local.Status.Conditions, trainer.TrainJobComplete), "mirrored: %+v", local.Status.Conditions)
	pods := &corev1.PodList{}
	require.NoError(t, manager.Client.List(t.Context(), pods, client.InNamespace(ns)))
	assert.Empty(t, pods.Items, "no pods on the manager")
}

// A node that fails on the worker fails the step on the manager with the worker Trainer's reason
// and message (mirrored), naming the cluster, and saying the log tail is not delivered rather
// than looking for pods the manager does not have.
func TestMultiKueueFailureCarriesTheRemoteCause(t *testing.T) {
	// Not parallel: the runtime it installs is a second torch runtime on both clusters while it
	// exists, and a torch step of a parallel test that names none would be refused as ambiguous.
	// A sequential test runs, and removes it, before the parallel ones resume.
	ns := manager.Namespace(t)
	q := manager.MultiKueueQueue(t, worker, ns, realstack.NodeGPUs)
	// Kueue on both clusters reads the runtime (the manager's to size the Workload).
	rt := manager.InstallNoRetryRuntime(t)
	require.Equal(t, rt, worker.InstallNoRetryRuntime(t))
	r := executor(t, ns, fmt.Sprintf(`
framework: torch
queueName: %s
runtime: {name: %s, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 1
  resourcesPerNode: {gpu: 1}
  env: {KWOK_FAIL: "1"}
  func: |
    def train():
        raise SystemExit(1)
timeout: 3m
`, q, rt))
	t.Logf("stderr:\n%s", r.Stderr)
	require.Equal(t, cli.ExitFailed, r.Code)
	assert.Equal(t, "Failed", r.Outputs[trainjob.OutPhase])
	// The manager's Failed condition is the worker Trainer's, mirrored (Kueue deletes the
	// worker's copy once the job is finished).
	local := &trainer.TrainJob{}
	require.NoError(t, manager.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: r.Outputs[trainjob.OutName]}, local))
	failed := meta.FindStatusCondition(local.Status.Conditions, trainer.TrainJobFailed)
	require.NotNil(t, failed, "the worker's Trainer must mark the TrainJob Failed: %+v", local.Status.Conditions)
	assert.Equal(t, failed.Reason, r.Outputs[trainjob.OutReason], "the worker Trainer's own reason")
	assert.Contains(t, r.Outputs[trainjob.OutMessage], failed.Message, "the worker Trainer's own message")
	assert.Contains(t, r.Outputs[trainjob.OutMessage], "it ran on cluster "+realstack.MultiKueueWorker+" (MultiKueue)")
	assert.Contains(t, r.Outputs[trainjob.OutMessage], "(no log tail: the pods ran on the worker cluster")
	assert.Equal(t, realstack.MultiKueueWorker, r.Outputs[trainjob.OutCluster])
	assert.Equal(t, "result, log", r.Outputs[trainjob.OutUndelivered])
}

// A step stopped on the manager (SIGTERM, as Argo's stop and Tekton's cancel end the
// executor's pod) while its job runs on the worker deletes the manager's TrainJob; Kueue deletes
// the remote one, and nothing is left on either cluster.
func TestMultiKueueCancelOnTheManagerDeletesTheRemoteJob(t *testing.T) {
	t.Parallel() // a namespace and queue of its own on each cluster, 1 GPU
	ns := manager.Namespace(t)
	q := manager.MultiKueueQueue(t, worker, ns, realstack.NodeGPUs)
	run := manager.StartExecutor(t, bin, ns, fmt.Sprintf(`
framework: torch
queueName: %s
trainer:
  numNodes: 1
  resourcesPerNode: {gpu: 1}
  env: {KWOK_RUN_SECONDS: "600"}
  func: |
    def train():
        pass
`, q), timeout)
	require.Eventually(t, func() bool {
		return strings.Contains(run.Stderr.String(), "is running on cluster "+realstack.MultiKueueWorker)
	}, timeout, interval, "the step must run on the worker: %s", &run.Stderr)
	require.Len(t, testenv.TrainJobs(t.Context(), t, worker.Client, ns), 1)

	run.Signal(t, syscall.SIGTERM)
	res := run.Result(t)
	assert.Equal(t, cli.ExitInterrupts, res.Code, "stderr:\n%s", res.Stderr)
	require.Eventually(t, func() bool {
		return len(testenv.TrainJobs(t.Context(), t, manager.Client, ns)) == 0 &&
			len(testenv.TrainJobs(t.Context(), t, worker.Client, ns)) == 0 &&
			len(workloads(t, manager, ns)) == 0 && len(workloads(t, worker, ns)) == 0
	}, timeout, interval, "the TrainJobs and Workloads must be gone from both clusters")
}

func workloads(t *testing.T, s *realstack.Stack, ns string) []unstructured.Unstructured {
	t.Helper()
	l := trainjob.NewWorkloadList()
	require.NoError(t, s.Client.List(t.Context(), l, client.InNamespace(ns)))
	return l.Items
}
