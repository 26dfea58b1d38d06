package realstack_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/test/internal/examples"
	"github.com/trainstep/trainstep/test/internal/realstack"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// TestEveryStepExampleRunsAsWritten runs each file under examples/steps as its header says: the
// commands it lists first (its Secrets), then `executor run -f` of the file's own bytes, against
// the real Trainer, JobSet and their webhooks, on a release the header says is enough. The
// examples that wait in a Kueue queue run in test/conformance, on the stack with Kueue.
func TestEveryStepExampleRunsAsWritten(t *testing.T) {
	t.Parallel()
	steps, err := examples.Steps()
	require.NoError(t, err)
	for _, s := range steps {
		if s.LocalQueue != "" {
			continue // test/conformance: TestEveryQueuedStepExampleRunsAsWritten
		}
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			ns := stack.Namespace(t)
			for _, secret := range s.Secrets {
				secret.Namespace = ns
				require.NoError(t, stack.Client.Create(t.Context(), secret))
			}
			if minorOf(trainerRelease(t)) < s.NeedsMinor {
				// What an older release does with it differs per example (refused at plan time, or
				// waiting for a PVC it does not make); the release's own suites cover that.
				realstack.Lacks(t, "Trainer %s is older than the v2.%d %s says it needs: not run", trainerRelease(t), s.NeedsMinor, s.Name)
				return
			}
			r := executor(t, ns, string(s.Bytes))
			require.Equal(t, cli.ExitSucceeded, r.Code, "stderr:\n%s\nstdout:\n%s", r.Stderr, r.Stdout)
			assert.Equal(t, "Succeeded", r.Outputs["phase"])
			assert.Len(t, testenv.TrainJobs(t.Context(), t, stack.Client, ns), 1, "one TrainJob per run")
		})
	}
}
