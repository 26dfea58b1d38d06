package tekton_test

import (
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
	"github.com/trainstep/trainstep/test/internal/tektonharness"
)

func trainJobsGone(t *testing.T, ns string) {
	t.Helper()
	require.Eventually(t, func() bool {
		l := &trainer.TrainJobList{}
		return c.List(t.Context(), l, client.InNamespace(ns)) == nil && len(l.Items) == 0
	}, timeout, interval, "the TrainJob must be deleted")
}

// TestResourceQuotaIsNamedWhileWaitingThenFailsAtStartTimeout: the second node's pod exceeds the
// namespace's ResourceQuota; the Job controller's FailedCreate Event on the Job names the quota,
// the waiting CustomRun's message carries it, and startTimeout fails the run with it.
func TestResourceQuotaIsNamedWhileWaitingThenFailsAtStartTimeout(t *testing.T) {
	dumpOnFailure(t)
	ns := stack.Namespace(t)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "one-pod", Namespace: ns},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}},
	}
	require.NoError(t, c.Create(t.Context(), quota))
	require.Eventually(t, func() bool {
		return c.Get(t.Context(), client.ObjectKeyFromObject(quota), quota) == nil && quota.Status.Hard != nil
	}, timeout, interval, "the resourcequota controller must count quota %s", quota.Name)
	pipelineRun(t, ns, `
framework: torch
trainer:
  numNodes: 2
  env: {KWOK_RUN_SECONDS: "600"}
  func: |
    def train():
        pass
startTimeout: 20s
`)
	const want = "is forbidden: exceeded quota: one-pod"
	waiting, ok := waitingMessage(t, ns, func(m string) bool { return strings.Contains(m, want) })
	if !ok {
		waiting = "" // the run finished first
	}
	t.Logf("while waiting: %s", waiting)
	assert.Contains(t, waiting, "cannot create pods: Error creating: pods", "the running CustomRun says why, in the Job's words")
	assert.Contains(t, waiting, want)

	tektonharness.WaitPipelineRun(t, c, ns, "run", "False", "Failed", timeout)
	cond := customRun(t, t, ns).Status.Succeeded()
	require.NotNil(t, cond)
	assert.Equal(t, trainjob.ReasonStartTimeout, cond.Reason)
	assert.Contains(t, cond.Message, "did not start within 20s (startTimeout)")
	assert.Contains(t, cond.Message, want)
	trainJobsGone(t, ns)
}

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
