package argo_test

import (
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/trainstep/trainstep/test/internal/argoharness"
)

// TestProgressFromTheStatusServerReachesTheNode: rank 0 posts progress and metrics to the
// Trainer's status server with what the Trainer injected into its pod; the Workflow node's
// message shows what the server wrote while it runs, and the final metrics are the declared
// outputs metric-<name>, read by the next step.
func TestProgressFromTheStatusServerReachesTheNode(t *testing.T) {
	wf := harness.Submit(t, `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: progress-}
spec:
  entrypoint: main
  serviceAccountName: trainstep-workflow
  templates:
    - name: main
      steps:
        - - name: train
            template: train
        - - name: evaluate
            template: evaluate
            arguments:
              parameters:
                - {name: loss, value: "{{steps.train.outputs.parameters.metric-loss}}"}
    - name: evaluate
      inputs:
        parameters: [{name: loss}]
      plugin:
        trainstep:
          key: "{{node.name}}"
          framework: torch
          trainer:
            env: {EVAL_LOSS: "{{inputs.parameters.loss}}"}
            func: |
              def train():
                  print("evaluating")
    - name: train
      outputs:
        parameters:
          - {name: metric-loss, valueFrom: {supplied: {}}}
          - {name: metric-eval-f1, valueFrom: {supplied: {}}}
      plugin:
        trainstep:
          key: "{{node.name}}"
          framework: torch
          trainer:
            numNodes: 2
            env: {KWOK_HOLD: "1"}
            func: |
              def train():
                  print("training")
`)
	harness.RunAgent(t, wf.Name, timeout)
	var name string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		tjs := trainJobs(t, wf)
		require.Len(c, tjs, 1)
		name = tjs[0].Name
	}, timeout, interval)
	rank0 := stack.Rank0(t, argoharness.Namespace, name)
	require.NoError(t, rank0.Report(t.Context(), ptr.To[int32](42), ptr.To[int32](720), [2]string{"loss", "0.31"}, [2]string{"acc", "0.88"}))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, err := harness.Get(t.Context(), wf.Name)
		require.NoError(c, err)
		node := nodeNamed(got, "train")
		require.NotNil(c, node)
		assert.Equal(c, wfv1.NodeRunning, node.Phase)
		assert.Contains(c, node.Message, "2/2 nodes · 42% · 12m left · loss=0.31 acc=0.88")
	}, timeout, interval)

	require.NoError(t, rank0.Report(t.Context(), ptr.To[int32](100), nil, [2]string{"loss", "0.12"}, [2]string{"eval/f1", "0.7"}))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		tj := trainJobs(t, wf)
		require.Len(c, tj, 1)
		require.NotNil(c, tj[0].Status.TrainerStatus)
		assert.Equal(c, int32(100), ptr.Deref(tj[0].Status.TrainerStatus.ProgressPercentage, 0))
	}, timeout, interval)
	require.NoError(t, stack.Release(t.Context(), argoharness.Namespace, name))
	got := harness.WaitPhase(t, wf.Name, timeout)
	require.Equal(t, wfv1.WorkflowSucceeded, got.Status.Phase, "%s\n%s", got.Status.Message, argoharness.Nodes(got))
	node := nodeNamed(got, "train")
	require.NotNil(t, node, argoharness.Nodes(got))
	assert.Equal(t, "0.12", argoharness.Output(node, "metric-loss"))
	assert.Equal(t, "0.7", argoharness.Output(node, "metric-eval-f1"))
	// The next step read the metric: its TrainJob got it as env.
	seen := []string{}
	for _, tj := range trainJobs(t, got) {
		for _, e := range tj.Spec.Trainer.Env {
			if e.Name == "EVAL_LOSS" {
				seen = append(seen, e.Value)
			}
		}
	}
	assert.Equal(t, []string{"0.12"}, seen)
}

// nodeNamed is the Workflow's node of that display name (this workflow has two plugin nodes).
func nodeNamed(wf *wfv1.Workflow, name string) *wfv1.NodeStatus {
	for _, n := range wf.Status.Nodes {
		if n.DisplayName == name {
			return &n
		}
	}
	return nil
}
