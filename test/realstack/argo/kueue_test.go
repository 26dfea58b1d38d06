package argo_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/argoharness"
	"github.com/trainstep/trainstep/test/internal/realstack"
)

// queuedWorkflow is a one-step Workflow running a step in Kueue queue q (extra: the rest of the
// step, indented), with the outputs Kueue's tests read declared.
func queuedWorkflow(q, extra string) string {
	return fmt.Sprintf(`
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: queued-}
spec:
  entrypoint: train
  serviceAccountName: trainstep-workflow
  templates:
    - name: train
      outputs:
        parameters:
          - {name: trainjob-name, valueFrom: {supplied: {}}}
          - {name: phase, valueFrom: {supplied: {}}}
          - {name: queue-wait-seconds, valueFrom: {supplied: {}}}
          - {name: preemptions, valueFrom: {supplied: {}}}
      plugin:
        trainstep:
          key: "{{node.name}}"
          framework: torch
          queueName: %s
%s`, q, extra)
}

// gpuTrainer is a one-node trainer block asking for every GPU of a queue.
var gpuTrainer = fmt.Sprintf(`          trainer:
            numNodes: 1
            resourcesPerNode: {gpu: %d}
            func: |
              def train():
                  pass
`, realstack.NodeGPUs)

// The Argo face under the real Kueue: a step whose queue has no free quota waits in it longer
// than its startTimeout; the node says where it is and why in Kueue's words while it waits, and
// succeeds once admitted (startTimeout counts from the admission), with the queue wait as an
// output. The sidecar reads the Workload with manifests/argo's RBAC.
func TestKueueQueuedStepSucceedsPastItsStartTimeout(t *testing.T) {
	q := stack.KueueQueue(t, argoharness.Namespace, realstack.NodeGPUs)
	stack.KueueBlocker(t, argoharness.Namespace, q, realstack.NodeGPUs, 45, "")
	wf := harness.Submit(t, queuedWorkflow(q, gpuTrainer+"          startTimeout: 20s\n"))
	harness.RunAgent(t, wf.Name, timeout)
	require.Eventually(t, func() bool {
		got, err := harness.Get(t.Context(), wf.Name)
		n := trainNode(got)
		return err == nil && n != nil && strings.Contains(n.Message, "insufficient unused quota for nvidia.com/gpu in flavor "+realstack.KueueFlavor)
	}, timeout, interval, "the node must say why it waits, in Kueue's words")

	got := harness.WaitPhase(t, wf.Name, timeout)
	require.Equal(t, wfv1.WorkflowSucceeded, got.Status.Phase, "%s\n%s", got.Status.Message, argoharness.Nodes(got))
	node := trainNode(got)
	require.NotNil(t, node, argoharness.Nodes(got))
	assert.Equal(t, "Succeeded", argoharness.Output(node, trainjob.OutPhase))
	wait, err := strconv.Atoi(argoharness.Output(node, trainjob.OutQueueWait))
	require.NoError(t, err, "outputs: %+v", node.Outputs)
	assert.Greater(t, wait, 20, "the premise: it waited in the queue longer than its startTimeout")
	assert.Equal(t, "0", argoharness.Output(node, trainjob.OutPreemptions))
}

// nodeMessage polls the Workflow's plugin node until its message satisfies ok or the Workflow
// completes; it returns the last message.
func nodeMessage(t *testing.T, name string, ok func(string) bool) string {
	t.Helper()
	var msg string
	require.Eventually(t, func() bool {
		got, err := harness.Get(t.Context(), name)
		if err != nil {
			return false
		}
		if n := trainNode(got); n != nil {
			msg = n.Message
		}
		return ok(msg) || got.Status.Phase.Completed()
	}, timeout, interval)
	return msg
}

// A running low-priority step is preempted by a high-priority TrainJob: the node says so in
// Kueue's words, requeued, keeps waiting, and succeeds once admitted again, with the preemption
// counted.
func TestKueuePreemptedStepIsRequeuedAndSucceeds(t *testing.T) {
	q := stack.KueueQueue(t, argoharness.Namespace, realstack.NodeGPUs)
	wf := harness.Submit(t, queuedWorkflow(q, fmt.Sprintf(`          labels: {%s: %s}
          trainer:
            numNodes: 1
            resourcesPerNode: {gpu: %d}
            env: {KWOK_RUN_SECONDS: "20"}
            func: |
              def train():
                  pass
`, realstack.KueuePriorityLabel, realstack.KueueLowPriority, realstack.NodeGPUs)))
	harness.RunAgent(t, wf.Name, timeout)
	running := nodeMessage(t, wf.Name, func(m string) bool { return strings.Contains(m, "is running: 1/1 nodes") })
	require.Contains(t, running, "is running: 1/1 nodes")

	stack.KueueBlocker(t, argoharness.Namespace, q, realstack.NodeGPUs, 10, realstack.KueueHighPriority)
	preempted := nodeMessage(t, wf.Name, func(m string) bool { return strings.Contains(m, "; requeued in LocalQueue") })
	assert.Contains(t, preempted, " was preempted by Kueue (InClusterQueue): ")
	assert.Contains(t, preempted, "; requeued in LocalQueue "+q)

	got := harness.WaitPhase(t, wf.Name, timeout)
	require.Equal(t, wfv1.WorkflowSucceeded, got.Status.Phase, "%s\n%s", got.Status.Message, argoharness.Nodes(got))
	assert.Equal(t, "1", argoharness.Output(trainNode(got), trainjob.OutPreemptions))
}

// `argo stop` while the step waits in its queue: the TrainJob is deleted, and with it Kueue's
// Workload; nothing is admitted later.
func TestKueueStoppedWhileQueuedLeavesNothing(t *testing.T) {
	q := stack.KueueQueue(t, argoharness.Namespace, 0) // never admits a GPU job
	wf := harness.Submit(t, queuedWorkflow(q, gpuTrainer))
	harness.RunAgent(t, wf.Name, timeout)
	msg := nodeMessage(t, wf.Name, func(m string) bool { return strings.Contains(m, "insufficient quota for nvidia.com/gpu") })
	require.Contains(t, msg, "insufficient quota for nvidia.com/gpu")
	tjs := trainJobs(t, wf)
	require.Len(t, tjs, 1)
	w, err := trainjob.FindWorkload(t.Context(), stack.Client, &tjs[0])
	require.NoError(t, err)
	require.NotNil(t, w, "Kueue made the TrainJob's Workload")

	cur, err := harness.Get(t.Context(), wf.Name)
	require.NoError(t, err)
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.Shutdown = wfv1.ShutdownStrategyStop
	require.NoError(t, harness.Client.Patch(t.Context(), cur, patch))
	got := harness.WaitPhase(t, wf.Name, timeout)
	assert.Equal(t, wfv1.WorkflowFailed, got.Status.Phase, argoharness.Nodes(got))
	require.Eventually(t, func() bool {
		l := trainjob.NewWorkloadList()
		return len(trainJobs(t, wf)) == 0 &&
			stack.Client.List(t.Context(), l, client.InNamespace(argoharness.Namespace), client.MatchingLabels{trainjob.LabelKueueJobUID: string(tjs[0].UID)}) == nil &&
			len(l.Items) == 0
	}, timeout, interval, "the TrainJob and its Workload must be gone")
}

// An admitted step whose pods are not Ready within Kueue's waitForPodsReady timeout is evicted
// (PodsReadyTimeout) and requeued; the node says so in Kueue's words, and succeeds once admitted
// again with pods that become Ready (realstack.HoldReadyEnv).
func TestKueueEvictedByWaitForPodsReadyIsRequeuedAndSucceeds(t *testing.T) {
	q := stack.KueueQueue(t, argoharness.Namespace, realstack.NodeGPUs)
	wf := harness.Submit(t, queuedWorkflow(q, fmt.Sprintf(`          trainer:
            numNodes: 1
            resourcesPerNode: {gpu: 1}
            env: {%s: "1"}
            func: |
              def train():
                  pass
          startTimeout: 1m
`, realstack.HoldReadyEnv)))
	harness.RunAgent(t, wf.Name, timeout)
	evicted := nodeMessage(t, wf.Name, func(m string) bool { return strings.Contains(m, "(PodsReadyTimeout)") })
	assert.Contains(t, evicted, " was evicted by Kueue (PodsReadyTimeout): ")
	require.Eventually(t, func() bool {
		tjs := trainJobs(t, wf)
		if len(tjs) != 1 {
			return false
		}
		resumed := trainjob.LastResumed(&tjs[0])
		return !ptr.Deref(tjs[0].Spec.Suspend, true) && resumed.After(tjs[0].CreationTimestamp.Time) &&
			stack.ReleaseHeldPods(t, argoharness.Namespace, resumed) > 0
	}, timeout, interval, "Kueue must admit the step again")

	got := harness.WaitPhase(t, wf.Name, timeout)
	require.Equal(t, wfv1.WorkflowSucceeded, got.Status.Phase, "%s\n%s", got.Status.Message, argoharness.Nodes(got))
	node := trainNode(got)
	assert.Equal(t, "0", argoharness.Output(node, trainjob.OutPreemptions))
}
