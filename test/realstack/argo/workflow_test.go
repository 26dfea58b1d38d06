package argo_test

import (
	"fmt"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/argoharness"
)

// Waits poll with these bounds; nothing sleeps to synchronise. Generous: the stack, Argo and
// the plugin share 2 cores, and kwok's stages have delays of a few seconds each.
const (
	timeout  = 3 * time.Minute
	interval = 200 * time.Millisecond
)

// workflow is a one-step Workflow running step (the plugin's fields, indented for the
// template) with every core output declared.
func workflow(name, step string) string {
	return fmt.Sprintf(`
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: %s-}
spec:
  entrypoint: train
  serviceAccountName: trainstep-workflow
  templates:
    - name: train
      outputs:
        parameters:
          - {name: trainjob-name, valueFrom: {supplied: {}}}
          - {name: phase, valueFrom: {supplied: {}}}
          - {name: reason, valueFrom: {supplied: {}}}
          - {name: runtime, valueFrom: {supplied: {}}}
          - {name: num-nodes, valueFrom: {supplied: {}}}
      plugin:
        trainstep:
          key: "{{node.name}}"
%s`, name, step)
}

// trainNode is the Workflow's plugin node.
func trainNode(wf *wfv1.Workflow) *wfv1.NodeStatus { return argoharness.PluginNode(wf) }

// trainJobs lists the TrainJobs the Workflow owns.
func trainJobs(t *testing.T, wf *wfv1.Workflow) []trainer.TrainJob {
	l := &trainer.TrainJobList{}
	require.NoError(t, stack.Client.List(t.Context(), l, client.InNamespace(argoharness.Namespace),
		client.MatchingLabels{trainjob.LabelOwnerUID: string(wf.UID)}))
	return l.Items
}

// TestTorchStepSucceedsThroughTheRealTrainer: a 2-node torch step goes through the Trainer's
// and JobSet's webhooks and controllers, the Job controller and the scheduler onto kwok Nodes,
// and the Workflow node succeeds with trainstep's outputs.
func TestTorchStepSucceedsThroughTheRealTrainer(t *testing.T) {
	wf := harness.Submit(t, workflow("torch", `          framework: torch
          trainer:
            numNodes: 2
            env: {KWOK_RUN_SECONDS: "5"}
            func: |
              def train():
                  print("hello from the real stack")
`))
	harness.RunAgent(t, wf.Name, timeout)
	got := harness.WaitPhase(t, wf.Name, timeout)
	require.Equal(t, wfv1.WorkflowSucceeded, got.Status.Phase, "%s\n%s", got.Status.Message, argoharness.Nodes(got))
	node := trainNode(got)
	require.NotNil(t, node, argoharness.Nodes(got))
	assert.Equal(t, wfv1.NodeSucceeded, node.Phase)
	name := argoharness.Output(node, trainjob.OutName)
	require.NotEmpty(t, name, "outputs: %+v", node.Outputs)
	assert.Equal(t, "Succeeded", argoharness.Output(node, trainjob.OutPhase))
	assert.Equal(t, "2", argoharness.Output(node, trainjob.OutNumNodes))
	assert.Equal(t, "torch-distributed", argoharness.Output(node, trainjob.OutRuntime))

	// The real Trainer says Complete, and its pods were Job pods of the JobSet on kwok Nodes.
	tj := &trainer.TrainJob{}
	require.NoError(t, stack.Client.Get(t.Context(), client.ObjectKey{Namespace: argoharness.Namespace, Name: name}, tj))
	assert.True(t, meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete), "%+v", tj.Status.Conditions)
	assert.Equal(t, wf.UID, tj.OwnerReferences[0].UID, "the Workflow owns the TrainJob")
	// The sidecar recorded the start on the TrainJob, as its ServiceAccount, through the RBAC and
	// admission policy of manifests/argo and the Trainer's webhook.
	_, err := time.Parse(time.RFC3339, tj.Annotations[trainjob.AnnotationStartedAt])
	assert.NoError(t, err, "the start is recorded on the TrainJob: %v", tj.Annotations)
	pods := &corev1.PodList{}
	require.NoError(t, stack.Client.List(t.Context(), pods, client.InNamespace(argoharness.Namespace),
		client.MatchingLabels{"jobset.sigs.k8s.io/jobset-name": name}))
	require.Len(t, pods.Items, 2)
	for _, p := range pods.Items {
		assert.Contains(t, stack.Nodes, p.Spec.NodeName, "pod %s", p.Name)
		assert.Equal(t, corev1.PodSucceeded, p.Status.Phase, "pod %s", p.Name)
	}
}
