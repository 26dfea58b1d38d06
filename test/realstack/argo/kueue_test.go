package argo_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/argoharness"
	"github.com/trainstep/trainstep/test/internal/realstack"
)

// queuedWorkflow is a one-step Workflow running a one-node step in Kueue queue q that asks for
// every GPU of the queue, with the outputs Kueue's tests read declared.
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
          trainer:
            numNodes: 1
            resourcesPerNode: {gpu: %d}
            func: |
              def train():
                  pass
%s`, q, realstack.NodeGPUs, extra)
}

// The Argo face under the real Kueue: a step whose queue has no free quota waits in it longer
// than its startTimeout; the node says where it is and why in Kueue's words while it waits, and
// succeeds once admitted (startTimeout counts from the admission), with the queue wait as an
// output. The sidecar reads the Workload with manifests/argo's RBAC.
func TestKueueQueuedStepSucceedsPastItsStartTimeout(t *testing.T) {
	q := stack.KueueQueue(t, argoharness.Namespace, realstack.NodeGPUs)
	stack.KueueBlocker(t, argoharness.Namespace, q, realstack.NodeGPUs, 30)
	wf := harness.Submit(t, queuedWorkflow(q, "          startTimeout: 10s\n"))
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
	assert.Greater(t, wait, 10, "the premise: it waited in the queue longer than its startTimeout")
	assert.Equal(t, "0", argoharness.Output(node, trainjob.OutPreemptions))
}
