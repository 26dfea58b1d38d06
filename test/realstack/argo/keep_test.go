package argo_test

import (
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/argoharness"
)

// TestKeepOnTimeoutKeepsARunningJobThroughTheRealTrainer: a step that trains longer than its
// timeout, with keepOnTimeout, times out; marking its TrainJob kept (an update the Trainer's
// webhook validates) is accepted, and the job, still running on its kwok Nodes, is there after
// its Workflow finished, with no owner to be collected with. (That the reaper and the janitor
// then leave it is proved with markers in test/e2e/argo.)
func TestKeepOnTimeoutKeepsARunningJobThroughTheRealTrainer(t *testing.T) {
	wf := harness.Submit(t, workflow("keep", `          framework: torch
          timeout: 20s
          keepOnTimeout: true
          trainer:
            numNodes: 2
            env: {KWOK_RUN_SECONDS: "600"}
            func: |
              def train():
                  print("training for ten minutes")
`))
	harness.RunAgent(t, wf.Name, timeout)
	got := harness.WaitPhase(t, wf.Name, timeout)
	require.Equal(t, wfv1.WorkflowFailed, got.Status.Phase, argoharness.Nodes(got))
	node := trainNode(got)
	require.NotNil(t, node, argoharness.Nodes(got))
	assert.Equal(t, "TimedOut", argoharness.Output(node, trainjob.OutPhase))
	assert.Contains(t, node.Message, "kept (keepOnTimeout)")
	assert.NotContains(t, node.Message, "could not be marked kept")
	name := argoharness.Output(node, trainjob.OutName)
	require.NotEmpty(t, name)
	t.Cleanup(func() {
		_ = stack.Client.Delete(t.Context(), &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: argoharness.Namespace, Name: name}})
	})
	tj := &trainer.TrainJob{}
	require.NoError(t, stack.Client.Get(t.Context(), client.ObjectKey{Namespace: argoharness.Namespace, Name: name}, tj))
	assert.True(t, trainjob.Kept(tj), "annotations: %v", tj.Annotations)
	assert.Empty(t, tj.OwnerReferences)
	assert.Nil(t, tj.DeletionTimestamp)
	assert.False(t, trainjob.Observe(tj, nil).Phase.Terminal(), "it still trains: %+v", tj.Status.Conditions)
}
