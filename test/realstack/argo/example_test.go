package argo_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/trainstep/trainstep/test/internal/argoharness"
)

// TestArgoExampleRunsAsWritten: examples/workflows/argo-train-dag.yaml as its header says, every
// pod really run, with the Trainer's TrainJobStatus gate on (argoharness.RunDAGExample; the
// conformance suite runs it with the gate off).
func TestArgoExampleRunsAsWritten(t *testing.T) {
	dumpPodsOnFailure(t)
	argoharness.RunDAGExample(t, harness, stack, true)
}

// dumpPodsOnFailure shows the end of every process's output (the workflow-controller, the
// plugin, the agent, each served pod's containers) when the test failed.
func dumpPodsOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			var b strings.Builder
			harness.DumpLogs(&b)
			if err := served.Err(); err != nil {
				fmt.Fprintf(&b, "running the served pods: %v\n", err)
			}
			t.Log(b.String())
		}
	})
}
