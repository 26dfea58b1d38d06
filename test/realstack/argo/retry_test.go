package argo_test

import (
	"fmt"
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/test/internal/argoharness"
	"github.com/trainstep/trainstep/test/internal/realstack"
)

// TestRetryStrategyExpressionRetriesOnlyRetryableFailures: the retryStrategy docs/failures.md
// shows, under Argo's own controller (which evaluates the expression against each failed
// attempt's node message) on the real Trainer: a step whose training code fails (class code) runs
// once, and one that cannot be scheduled by its startTimeout (unschedulable) runs both attempts,
// each attempt's node saying its class first.
func TestRetryStrategyExpressionRetriesOnlyRetryableFailures(t *testing.T) {
	noRetry := stack.InstallNoRetryRuntime(t)
	cases := []struct {
		name, trainer string
		class         string
		retryable     bool
		attempts      int
	}{
		{name: "code", class: "code", retryable: false, attempts: 1, trainer: `
            numNodes: 1
            env: {KWOK_FAIL: "1"}
            func: "def train():\n    raise SystemExit(1)\n"`},
		{name: "unschedulable", class: "unschedulable", retryable: true, attempts: 2, trainer: fmt.Sprintf(`
            numNodes: 1
            resourcesPerNode: {gpu: %d}
            func: "def train():\n    pass\n"`, realstack.NodeGPUs*2)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wf := harness.Submit(t, fmt.Sprintf(`
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: classed-retry-}
spec:
  entrypoint: train
  serviceAccountName: trainstep-workflow
  templates:
    - name: train
      retryStrategy:
        limit: "1"
        expression: "lastRetry.message matches 'retryable=true'"
      plugin:
        trainstep:
          key: "{{node.name}}"
          attempt: "{{retries}}"
          framework: torch
          runtime: {name: %s, kind: ClusterTrainingRuntime}
          startTimeout: 20s
          trainer:%s
`, noRetry, tc.trainer))
			harness.RunAgent(t, wf.Name, timeout)
			got := harness.WaitPhase(t, wf.Name, timeout)
			require.Equal(t, wfv1.WorkflowFailed, got.Status.Phase, argoharness.Nodes(got))
			prefix := fmt.Sprintf("failure-class=%s retryable=%t: ", tc.class, tc.retryable)
			attempts := 0
			for _, n := range got.Status.Nodes {
				if n.Type != wfv1.NodeTypePlugin {
					continue
				}
				attempts++
				assert.True(t, strings.HasPrefix(n.Message, prefix), "attempt %s: %q does not begin %q", n.Name, n.Message, prefix)
			}
			assert.Equal(t, tc.attempts, attempts, argoharness.Nodes(got))
		})
	}
}
