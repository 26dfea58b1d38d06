package argo_test

import (
	"fmt"
	"strings"
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
	"github.com/trainstep/trainstep/test/internal/realstack"
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

// TestFailedNodeCarriesTheTrainersReasonAndTraceback: a node exits 1 (no Job retries); the
// Workflow node fails with the Trainer's own reason and the traceback read through pods/log.
func TestFailedNodeCarriesTheTrainersReasonAndTraceback(t *testing.T) {
	rt := stack.InstallNoRetryRuntime(t)
	traceback := []string{
		"Traceback (most recent call last):",
		`  File "train.py", line 7, in train`,
		"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
	}
	stack.SetNodeLog(t, traceback...)
	wf := harness.Submit(t, workflow("fail", `          framework: torch
          runtime: {name: `+rt+`, kind: ClusterTrainingRuntime}
          trainer:
            numNodes: 2
            env: {KWOK_FAIL: "1"}
            func: |
              def train():
                  raise SystemExit(1)
`))
	harness.RunAgent(t, wf.Name, timeout)
	got := harness.WaitPhase(t, wf.Name, timeout)
	require.Equal(t, wfv1.WorkflowFailed, got.Status.Phase, argoharness.Nodes(got))
	node := trainNode(got)
	require.NotNil(t, node, argoharness.Nodes(got))
	assert.Equal(t, wfv1.NodeFailed, node.Phase)
	t.Logf("node message:\n%s", node.Message)

	tjs := trainJobs(t, got)
	require.Len(t, tjs, 1)
	failed := meta.FindStatusCondition(tjs[0].Status.Conditions, trainer.TrainJobFailed)
	require.NotNil(t, failed, "the Trainer must mark the TrainJob Failed: %+v", tjs[0].Status.Conditions)
	assert.Equal(t, failed.Reason, argoharness.Output(node, trainjob.OutReason), "the Trainer's own reason")
	assert.Contains(t, node.Message, failed.Message, "the Trainer's own message")
	assert.Contains(t, node.Message, "last lines of")
	for _, line := range traceback {
		assert.Contains(t, node.Message, line)
	}
}

// TestUnschedulableStepSaysWhyThenFailsAtStartTimeout: a pod no Node can hold; while it waits
// the node's message gives the scheduler's reason, and startTimeout fails the node and deletes
// the TrainJob.
func TestUnschedulableStepSaysWhyThenFailsAtStartTimeout(t *testing.T) {
	wf := harness.Submit(t, workflow("unschedulable", fmt.Sprintf(`          framework: torch
          trainer:
            numNodes: 1
            resourcesPerNode: {gpu: %d}
            func: |
              def train():
                  pass
          startTimeout: 10s
`, realstack.NodeGPUs*2)))
	harness.RunAgent(t, wf.Name, timeout)

	var waiting string
	require.Eventually(t, func() bool {
		cur, err := harness.Get(t.Context(), wf.Name)
		if err != nil {
			return false
		}
		if n := trainNode(cur); n != nil && (n.Phase == wfv1.NodePending || n.Phase == wfv1.NodeRunning) {
			waiting = n.Message
		}
		return cur.Status.Phase.Completed() || strings.Contains(waiting, "Insufficient nvidia.com/gpu")
	}, timeout, 50*time.Millisecond)
	t.Logf("while waiting: %s", waiting)
	assert.Contains(t, waiting, "Insufficient nvidia.com/gpu", "the running node says why, in the scheduler's words")

	got := harness.WaitPhase(t, wf.Name, timeout)
	require.Equal(t, wfv1.WorkflowFailed, got.Status.Phase, argoharness.Nodes(got))
	node := trainNode(got)
	require.NotNil(t, node, argoharness.Nodes(got))
	assert.Equal(t, wfv1.NodeFailed, node.Phase)
	assert.Equal(t, trainjob.ReasonStartTimeout, argoharness.Output(node, trainjob.OutReason))
	assert.Contains(t, node.Message, "did not start within 10s (startTimeout)")
	assert.Contains(t, node.Message, "Insufficient nvidia.com/gpu")
	require.Eventually(t, func() bool { return len(trainJobs(t, got)) == 0 }, timeout, interval, "the TrainJob must be deleted")
}
