package realstack_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/test/internal/realstack"
	"github.com/trainstep/trainstep/test/internal/testenv"
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

// An image that cannot be pulled: the step says so in the kubelet's words while it waits, and
// startTimeout fails it with that cause and deletes the TrainJob. startTimeout leaves room for the
// pod to be made and back off on a loaded machine (10 s did not, with builds beside it).
func TestImagePullBackOffIsReportedAndFailsAtStartTimeout(t *testing.T) {
	t.Parallel()
	ns := stack.Namespace(t)
	r := executor(t, ns, `
trainer:
  kind: CustomTrainerContainer
  image: registry.example.com/no-such/image:1
  command: [python, /app/train.py]
  env: {KWOK_IMAGE_PULL_BACKOFF: "1"}
timeout: 5m
startTimeout: 30s
`)
	require.Equal(t, cli.ExitFailed, r.Code, "stderr:\n%s", r.Stderr)
	assert.Equal(t, "StartTimeout", r.Outputs["reason"])
	assert.Contains(t, r.Outputs["message"], `ImagePullBackOff: Back-off pulling image "registry.example.com/no-such/image:1"`)
	assert.Contains(t, r.Stderr, "ImagePullBackOff", "the running message says why before the end")
	require.Eventually(t, func() bool { return len(testenv.TrainJobs(t.Context(), t, stack.Client, ns)) == 0 },
		timeout, interval, "the TrainJob must be deleted")
}
