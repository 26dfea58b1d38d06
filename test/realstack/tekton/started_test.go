package tekton_test

import (
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
	"github.com/trainstep/trainstep/test/internal/tektonharness"
)

// waitingMessage waits until the namespace's one CustomRun is Succeeded=Unknown with a message
// that ok accepts, or finished; it returns the message and whether the run was still waiting.
func waitingMessage(t *testing.T, ns string, ok func(string) bool) (string, bool) {
	t.Helper()
	var msg string
	waiting := false
	require.Eventually(t, func() bool {
		runs := &v1beta1.CustomRunList{}
		if c.List(t.Context(), runs, client.InNamespace(ns)) != nil || len(runs.Items) != 1 {
			return false
		}
		cond := runs.Items[0].Status.Succeeded()
		if cond == nil {
			return false
		}
		waiting = cond.Status == corev1.ConditionUnknown
		msg = cond.Message
		return !waiting || ok(msg)
	}, timeout, 50*time.Millisecond)
	return msg, waiting
}

// TestAStartedStepWaitsThroughAnEvictedNode: the reproduction under Tekton's controller.
// A 2-node step with startTimeout 30s runs (not the 10s: on a loaded machine the second
// node can take over 10 s to be scheduled, and the job must start first); node 0's pod is evicted while the Nodes are
// cordoned, so its replacement waits for a Node past the startTimeout. The run stays Unknown
// (Running) with what happened to node 0 and why its replacement waits, and succeeds once a
// Node is back; the TrainJob is not deleted and carries the start record.
func TestAStartedStepWaitsThroughAnEvictedNode(t *testing.T) {
	const startTimeout = 30 * time.Second
	dumpOnFailure(t)
	ns := stack.Namespace(t)
	pipelineRun(t, ns, `
framework: torch
trainer:
  numNodes: 2
  env: {KWOK_RUN_SECONDS: "45"}
  func: |
    def train():
        pass
startTimeout: 30s
`)
	msg, waiting := waitingMessage(t, ns, func(m string) bool { return strings.Contains(m, "is running: 2/2 nodes") })
	require.True(t, waiting, "the run ended before both nodes ran: %s", msg)
	l := &trainer.TrainJobList{}
	require.NoError(t, c.List(t.Context(), l, client.InNamespace(ns)))
	require.Len(t, l.Items, 1)
	tj := l.Items[0]
	pods := &corev1.PodList{}
	require.NoError(t, c.List(t.Context(), pods, client.InNamespace(ns), client.MatchingLabels{
		trainjob.LabelJobSetName: tj.Name, trainjob.LabelReplicatedJob: trainjob.NodeJob, trainjob.LabelCompletionIndex: "0"}))
	require.Len(t, pods.Items, 1)
	victim := pods.Items[0].Name

	uncordon := stack.Cordon(t)
	const why = "The node was low on resource: memory."
	require.NoError(t, stack.Evict(t.Context(), ns, victim, why))
	msg, waiting = waitingMessage(t, ns, func(m string) bool {
		return time.Since(tj.CreationTimestamp.Time) > startTimeout+2*time.Second && strings.Contains(m, "were unschedulable")
	})
	t.Logf("while the replacement waits: %s", msg)
	require.True(t, waiting, "the run ended while node 0's replacement waited: %s", msg)
	assert.Contains(t, msg, "is running: 1/2 nodes; node 0 (pod "+victim+") was evicted, attempt 1: "+why+"; the Job is retrying it: its replacement (pod ")
	uncordon()

	tektonharness.WaitPipelineRun(t, c, ns, "run", "True", "Succeeded", timeout)
	got := &trainer.TrainJob{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(&tj), got), "the TrainJob is not deleted")
	_, err := time.Parse(time.RFC3339, got.Annotations[trainjob.AnnotationStartedAt])
	assert.NoError(t, err, "the start is recorded on the TrainJob: %v", got.Annotations)
}
