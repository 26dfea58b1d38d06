package tekton_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/realstack"
	"github.com/trainstep/trainstep/test/internal/tektonharness"
)

// The Tekton face under the real Kueue: a step whose queue has no free quota waits in it longer
// than its startTimeout; the running CustomRun says where it is and why in Kueue's words, and
// succeeds once admitted (startTimeout counts from the admission), with the queue wait as a
// result. The controller watches Workloads with manifests/tekton's RBAC.
func TestKueueQueuedStepSucceedsPastItsStartTimeout(t *testing.T) {
	dumpOnFailure(t)
	ns := stack.Namespace(t)
	q := stack.KueueQueue(t, ns, realstack.NodeGPUs)
	stack.KueueBlocker(t, ns, q, realstack.NodeGPUs, 30, "")
	pipelineRun(t, ns, fmt.Sprintf(`
framework: torch
queueName: %s
trainer:
  numNodes: 1
  resourcesPerNode: {gpu: %d}
  func: |
    def train():
        pass
startTimeout: 10s
`, q, realstack.NodeGPUs))
	const want = "insufficient unused quota for nvidia.com/gpu in flavor " + realstack.KueueFlavor
	waiting, ok := waitingMessage(t, ns, func(m string) bool { return strings.Contains(m, want) })
	require.True(t, ok, "the run ended before saying why it waits: %s", waiting)
	assert.Contains(t, waiting, " is queued in LocalQueue "+q+" (Workload ")

	tektonharness.WaitPipelineRun(t, c, ns, "run", "True", "Succeeded", timeout)
	res := results(customRun(t, t, ns))
	assert.Equal(t, "Succeeded", res[trainjob.OutPhase])
	wait, err := strconv.Atoi(res[trainjob.OutQueueWait])
	require.NoError(t, err, "results: %v", res)
	assert.Greater(t, wait, 10, "the premise: it waited in the queue longer than its startTimeout")
	assert.Equal(t, "0", res[trainjob.OutPreemptions])
}
