package tekton_test

import (
	"testing"

	"github.com/trainstep/trainstep/test/internal/tektonharness"
)

// TestTektonExampleRunsAsWritten: examples/workflows/tekton-train-pipeline.yaml runs as its
// header says, every pod really run, with the Trainer's TrainJobStatus gate on (this suite's):
// tektonharness.RunExample says what is proved. test/realstack runs it with the gate off.
func TestTektonExampleRunsAsWritten(t *testing.T) {
	dumpOnFailure(t)
	tektonharness.RunExample(t, c, stack, pods)
}
