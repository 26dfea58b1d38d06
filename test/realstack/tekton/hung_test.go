package tekton_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/tektonharness"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// TestAHungJobIsRetriedThenFailsAsHung: hangTimeout and retry through Tekton's face, on the
// Trainer's real status server (the conformance stack runs with its gate off): rank 0 of each
// TrainJob reports once and then nothing; trainstep deletes the hung job and, as retry: asks,
// makes a second, which hangs too; the CustomRun fails as hung, retryable, naming what the
// second last reported. Tekton's own retries could not have told this from a bug.
func TestAHungJobIsRetriedThenFailsAsHung(t *testing.T) {
	dumpOnFailure(t)
	ns := stack.Namespace(t)
	tektonharness.CreateStepPipelineRun(t, c, ns, "run", `
framework: torch
hangTimeout: 15s
retry: {limit: 1}
trainer:
  numNodes: 1
  env: {KWOK_HOLD: "1"}
  func: |
    def train():
        print("training")
`)
	names := stack.ReportOnceEach(t, ns, func() []string {
		var names []string
		for _, tj := range testenv.TrainJobs(t.Context(), t, stack.Client, ns) {
			names = append(names, tj.Name)
		}
		return names
	}, 2)
	tektonharness.WaitPipelineRun(t, c, ns, "run", "False", "Failed", timeout)
	run := customRun(t, t, ns)
	cond := run.Status.Succeeded()
	require.NotNil(t, cond)
	assert.Regexp(t, `TrainJob \S+ is hung: its progress has not moved for 15s \(hangTimeout\); it last reported 38% at \S+Z`, cond.Message)
	res := results(run)
	assert.Equal(t, string(trainjob.ClassHung), res[trainjob.OutFailureClass])
	assert.Equal(t, "true", res[trainjob.OutRetryable])
	assert.Equal(t, names[1], res[trainjob.OutName], "the retry's TrainJob is the step's")
	assert.Empty(t, testenv.TrainJobs(t.Context(), t, stack.Client, ns), "both hung TrainJobs are deleted")
}
