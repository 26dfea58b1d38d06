package realstack_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/test/internal/examples"
	"github.com/trainstep/trainstep/test/internal/realstack"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// TestEveryStepExampleRunsAsWritten runs each file under examples/steps as its header says: the
// commands it lists first (its Secrets), then `executor run -f` of the file's own bytes as many
// times as it says (a cached step trains once and is then served), against
// the real Trainer, JobSet and their webhooks, on a release the header says is enough. The
// examples that wait in a Kueue queue run in test/conformance, on the stack with Kueue.
func TestEveryStepExampleRunsAsWritten(t *testing.T) {
	t.Parallel()
	steps, err := examples.Steps()
	require.NoError(t, err)
	for _, s := range steps {
		if s.LocalQueue != "" || s.Local {
			continue // test/conformance: TestEveryQueuedStepExampleRunsAsWritten; test/e2e/cli: TestEveryLocalStepExampleRunsAsWritten
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
			spec, err := step.Parse(s.Bytes)
			require.NoError(t, err)
			var first map[string]string
			for i := range s.Runs { // the header's commands all run the file as it is
				r := executor(t, ns, string(s.Bytes))
				require.Equal(t, cli.ExitSucceeded, r.Code, "run %d\nstderr:\n%s\nstdout:\n%s", i+1, r.Stderr, r.Stdout)
				assert.Equal(t, "Succeeded", r.Outputs["phase"])
				if spec.Cache == nil {
					assert.Len(t, testenv.TrainJobs(t.Context(), t, stack.Client, ns), i+1, "one TrainJob per run")
					continue
				}
				// A cached step trains once: every later run is served the first run's outputs.
				assert.Len(t, testenv.TrainJobs(t.Context(), t, stack.Client, ns), 1, "one TrainJob, whatever the runs")
				if i == 0 {
					first = r.Outputs
					assert.Equal(t, "false", r.Outputs["cache-hit"])
					continue
				}
				assert.Equal(t, "true", r.Outputs["cache-hit"], "run %d", i+1)
				assert.Equal(t, first["trainjob-name"], r.Outputs["cached-from"])
				for _, name := range []string{"trainjob-name", "result", "completion-time", "cache-key"} {
					assert.Equal(t, first[name], r.Outputs[name], "run %d: %s, as the first run wrote it", i+1, name)
				}
			}
		})
	}
}
