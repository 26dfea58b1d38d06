package argo_test

import (
	"fmt"
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/argoharness"
	"github.com/trainstep/trainstep/test/internal/realstack"
)

// The Argo face on a MultiKueue manager: the plugin step's TrainJob is dispatched to the worker;
// while it runs there the node says so (from the status MultiKueue mirrors: no pods on the
// manager), its startTimeout, shorter than the run, deletes nothing, and the node succeeds with
// the worker cluster and what stays on the worker's pods among its outputs. The conformance
// table cannot hold this scenario: a manager's Kueue runs without waitForPodsReady, which its
// other Kueue scenarios need; test/realstack/multikueue runs it through the CLI and Tekton faces.
func TestMultiKueueStepRunsOnTheWorkerAndSucceeds(t *testing.T) {
	q := stack.MultiKueueQueue(t, worker, argoharness.Namespace, realstack.NodeGPUs)
	wf := harness.Submit(t, argoharness.StepWorkflow("multikueue", fmt.Sprintf(`framework: torch
queueName: %s
trainer:
  numNodes: 1
  resourcesPerNode: {gpu: 1}
  env: {KWOK_RUN_SECONDS: "20"}
  func: |
    def train():
        return 1
startTimeout: 15s
`, q), trainjob.OutPhase, trainjob.OutCluster, trainjob.OutUndelivered, trainjob.OutResult))
	harness.RunAgent(t, wf.Name, timeout)
	var running string
	require.Eventually(t, func() bool {
		got, err := harness.Get(t.Context(), wf.Name)
		if err != nil {
			return false
		}
		if n := trainNode(got); n != nil {
			running = n.Message
		}
		return got.Status.Phase.Completed() || strings.Contains(running, "is running on cluster "+realstack.MultiKueueWorker)
	}, timeout, interval)
	assert.Contains(t, running, "is running on cluster "+realstack.MultiKueueWorker+" (MultiKueue)")

	got := harness.WaitPhase(t, wf.Name, timeout)
	require.Equal(t, wfv1.WorkflowSucceeded, got.Status.Phase, "%s\n%s", got.Status.Message, argoharness.Nodes(got))
	node := trainNode(got)
	assert.Equal(t, "Succeeded", argoharness.Output(node, trainjob.OutPhase))
	assert.Equal(t, realstack.MultiKueueWorker, argoharness.Output(node, trainjob.OutCluster))
	assert.Equal(t, trainjob.Undelivered, argoharness.Output(node, trainjob.OutUndelivered))
	assert.Equal(t, "", argoharness.Output(node, trainjob.OutResult))
}
