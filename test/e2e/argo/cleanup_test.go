package argo_test

import (
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/argoharness"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// TestJanitorStopsTheOrphanedAttemptOfARetriedStep: a step with a retryStrategy whose first
// attempt's sidecar dies (killed: no sweep). Argo's agent cannot reach the plugin, fails the
// attempt's node train(0), and Argo's controller starts train(1), whose call reaches the
// restarted sidecar and starts attempt 1's TrainJob; the Retry node train stays Running all
// along. The janitor deletes attempt 0's TrainJob while attempt 1 trains, and attempt 1's
// TrainJob is never touched: it completes and the workflow Succeeds.
func TestJanitorStopsTheOrphanedAttemptOfARetriedStep(t *testing.T) {
	harness.StartJanitor(t)
	wf := harness.Submit(t, `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: train-orphan-}
spec:
  entrypoint: main
  serviceAccountName: trainstep-workflow
  templates:
    - name: main
      steps:
        - - {name: train, template: train}
    - name: train
      retryStrategy: {limit: "1"}
      plugin:
        trainstep:
          key: "{{node.name}}"
          attempt: "{{retries}}"
          framework: xgboost
          labels: {sim-mode: hold}
          trainer: {numNodes: 1, func: "def train():\n    pass\n"}
`)
	harness.RunAgent(t, wf.Name, e2eTimeout)
	first := waitAttempt(t, wf, "0")

	harness.KillPlugin(t) // the sidecar dies: OOM-killed, say
	running := false
	t.Cleanup(func() {
		if !running {
			harness.StartPlugin(t) // the rest of the suite needs it
		}
	})
	var cur *wfv1.Workflow
	require.Eventually(t, func() bool {
		var err error
		cur, err = harness.Get(t.Context(), wf.Name)
		n := cur.Status.Nodes.FindByName(wf.Name + "[0].train(0)")
		return err == nil && n != nil && n.Phase.Fulfilled(nil)
	}, e2eTimeout, argoharness.Poll, "Argo must fail attempt 0 when its sidecar is gone: %s", nodesOrEmpty(cur))
	harness.StartPlugin(t) // the kubelet restarts the sidecar
	running = true

	second := waitAttempt(t, wf, "1")
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(c.Get(t.Context(), client.ObjectKey{Namespace: Namespace, Name: first}, &trainer.TrainJob{}))
	}, e2eTimeout, argoharness.Poll, "the janitor must delete attempt 0's TrainJob %s while attempt 1 runs", first)
	cur, err := harness.Get(t.Context(), wf.Name)
	require.NoError(t, err)
	parent := cur.Status.Nodes.FindByName(wf.Name + "[0].train")
	require.NotNil(t, parent, argoharness.Nodes(cur))
	assert.Equal(t, wfv1.NodeTypeRetry, parent.Type)
	assert.False(t, cur.Status.Phase.Completed(), "attempt 0's job went while the workflow ran: %s", argoharness.Nodes(cur))

	tj := &trainer.TrainJob{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: Namespace, Name: second}, tj))
	assert.Nil(t, tj.DeletionTimestamp, "attempt 1's TrainJob stays")
	_, err = complete(t.Context(), second)
	require.NoError(t, err)
	got := harness.WaitPhase(t, wf.Name, e2eTimeout)
	require.Equal(t, wfv1.WorkflowSucceeded, got.Status.Phase, argoharness.Nodes(got))
	assert.Equal(t, second, argoharness.Output(got.Status.Nodes.FindByName(wf.Name+"[0].train(1)"), trainjob.OutName))
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: Namespace, Name: second}, tj))
}

// TestKeepOnTimeoutKeepsTheTrainJobAfterTheWorkflow: a step with timeout and keepOnTimeout
// times out under Argo's controller and agent, and its workflow fails. The TrainJob still
// trains, and stays: through the plugin's reaper (the workflow completed), its sweep (the
// sidecar stopped), the janitor (its node is finished) and the garbage collector (the
// Workflow deleted). A TrainJob of the same workflow that is not kept, made after each of those
// has seen the workflow end, is deleted by each: proof that each looked.
func TestKeepOnTimeoutKeepsTheTrainJobAfterTheWorkflow(t *testing.T) {
	wf := harness.Submit(t, `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: train-keep-}
spec:
  entrypoint: train
  serviceAccountName: trainstep-workflow
  templates:
    - name: train
      plugin:
        trainstep:
          key: "{{node.name}}"
          framework: xgboost
          timeout: 5s
          keepOnTimeout: true
          labels: {sim-mode: hold}
          trainer: {numNodes: 1, func: "def train():\n    pass\n"}
`)
	harness.RunAgent(t, wf.Name, e2eTimeout)
	got := harness.WaitPhase(t, wf.Name, e2eTimeout)
	require.Equal(t, wfv1.WorkflowFailed, got.Status.Phase, argoharness.Nodes(got))
	node := got.Status.Nodes.FindByName(wf.Name)
	require.NotNil(t, node, argoharness.Nodes(got))
	assert.Contains(t, node.Message, "kept (keepOnTimeout)")
	assert.Equal(t, "TimedOut", argoharness.Output(node, "phase"))
	kept := argoharness.Output(node, trainjob.OutName)
	require.NotEmpty(t, kept)

	stays := func(after string) {
		t.Helper()
		tj := &trainer.TrainJob{}
		require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: Namespace, Name: kept}, tj), "the kept TrainJob must stay %s", after)
		assert.Nil(t, tj.DeletionTimestamp, after)
		assert.True(t, trainjob.Kept(tj), "annotations: %v", tj.Annotations)
		assert.Empty(t, tj.OwnerReferences, "a kept job has no owner to be collected with")
		assert.False(t, trainjob.Observe(tj, nil).Phase.Terminal(), "it still trains")
	}
	stays("after the timeout")
	// The plugin's reaper saw the workflow complete.
	deletedBy(t, got, kept, "m1", "the plugin's reaper")
	stays("after the reaper looked")
	// The agent pod goes with the finished workflow: the sidecar sweeps on its way out.
	harness.StopPlugin(t)
	t.Cleanup(func() { harness.StartPlugin(t) })
	stays("after the sidecar's sweep")
	// The janitor, alone now, sees a finished node of a finished workflow.
	harness.StartJanitor(t)
	deletedBy(t, got, kept, "m2", "the janitor")
	stays("after the janitor looked")
	// Deleting the Workflow collects what it owns, not the kept job.
	marker := markerFor(t, got, kept, "m3")
	require.NoError(t, c.Delete(t.Context(), got, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(c.Get(t.Context(), client.ObjectKeyFromObject(marker), &trainer.TrainJob{}))
	}, e2eTimeout, argoharness.Poll, "the garbage collector must delete the Workflow's unkept TrainJob")
	stays("after the Workflow was deleted")
	require.NoError(t, c.Delete(t.Context(), &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: kept}}))
}

// waitAttempt waits for the workflow's TrainJob of an attempt and returns its name.
func waitAttempt(t *testing.T, wf *wfv1.Workflow, attempt string) string {
	t.Helper()
	var name string
	require.Eventually(t, func() bool {
		l := &trainer.TrainJobList{}
		if c.List(t.Context(), l, client.InNamespace(Namespace), client.MatchingLabels{
			trainjob.LabelOwnerUID: string(wf.UID), trainjob.LabelAttempt: attempt}) != nil || len(l.Items) == 0 {
			return false
		}
		name = l.Items[0].Name
		return true
	}, e2eTimeout, testenv.Interval, "the plugin must start attempt %s's TrainJob", attempt)
	return name
}

// markerFor creates an unfinished TrainJob of the workflow that is not kept: a copy of the kept
// one's identity labels, its step key and an owner reference to the Workflow, as the plugin
// makes them.
func markerFor(t *testing.T, wf *wfv1.Workflow, kept, suffix string) *trainer.TrainJob {
	t.Helper()
	tj := &trainer.TrainJob{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: Namespace, Name: kept}, tj))
	m := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: kept + "-" + suffix, Labels: tj.Labels,
		Annotations:     map[string]string{trainjob.AnnotationStepKey: wf.Name},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: wfv1.SchemeGroupVersion.String(), Kind: "Workflow", Name: wf.Name, UID: wf.UID}},
	}, Spec: tj.Spec}
	require.NoError(t, c.Create(t.Context(), m))
	return m
}

// deletedBy waits for a marker TrainJob made now to be deleted: whoever deletes it (the one
// cleaner running) has looked at the finished workflow, the kept job among its TrainJobs.
func deletedBy(t *testing.T, wf *wfv1.Workflow, kept, suffix, who string) {
	t.Helper()
	m := markerFor(t, wf, kept, suffix)
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(c.Get(t.Context(), client.ObjectKeyFromObject(m), &trainer.TrainJob{}))
	}, e2eTimeout, argoharness.Poll, "%s must delete the finished workflow's unkept TrainJob %s", who, m.Name)
}

func nodesOrEmpty(wf *wfv1.Workflow) string {
	if wf == nil {
		return ""
	}
	return strings.TrimSpace(argoharness.Nodes(wf))
}
