package realstack_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/test/internal/realstack"
)

// A node that fails is retried by its Job for minutes (backoffLimit 6); meanwhile the step names
// the node, its exit code and attempt, with the tail of its log read through pods/log. One node
// more than there are GPU Nodes: the job never has every node running at once, so it never
// starts and startTimeout ends it.
func TestRetriedNodeIsReportedWithItsExitCodeAndLog(t *testing.T) {
	ns := stack.Namespace(t)
	stack.SetNodeLog(t, "Traceback (most recent call last):", "RuntimeError: NCCL error: unhandled system error")
	r := executor(t, ns, fmt.Sprintf(`
framework: torch
trainer:
  numNodes: %d
  resourcesPerNode: {gpu: %d}
  env: {KWOK_FAIL: "1"}
  func: |
    def train():
        raise SystemExit(1)
timeout: 5m
startTimeout: 20s
`, realstack.NodeCount+1, realstack.NodeGPUs))
	require.Equal(t, cli.ExitFailed, r.Code, "stderr:\n%s", r.Stderr)
	assert.Equal(t, "StartTimeout", r.Outputs["reason"])
	assert.Contains(t, r.Stderr, "failed (exit code 1), attempt", "while the Job retries")
	assert.Contains(t, r.Stderr, "the Job is retrying it")
	assert.Contains(t, r.Outputs["message"], "RuntimeError: NCCL error: unhandled system error", "the failing node's log tail")
}
