package conformance_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/test/internal/argoharness"
	"github.com/trainstep/trainstep/test/internal/examples"
	"github.com/trainstep/trainstep/test/internal/realstack"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// TestEveryQueuedStepExampleRunsAsWritten runs each file under examples/steps whose header names
// a Kueue LocalQueue as the header says: the LocalQueue of that name in the step's namespace (a
// ClusterQueue behind it, as Kueue's quick start makes), then `executor run -f` of the file's
// own bytes. Kueue's webhook suspends the TrainJob, Kueue admits it, and the step succeeds and
// says what Kueue did. The other step examples run in test/realstack.
func TestEveryQueuedStepExampleRunsAsWritten(t *testing.T) {
	t.Parallel()
	steps, err := examples.Steps()
	require.NoError(t, err)
	ran := 0
	for _, s := range steps {
		if s.LocalQueue == "" || s.Local {
			continue // test/realstack: TestEveryStepExampleRunsAsWritten; test/e2e/cli: TestEveryLocalStepExampleRunsAsWritten
		}
		ran++
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			tr, _, err := realstack.Release(stack.Assets)
			require.NoError(t, err)
			// Kueue runs on the suite's default stack only, whose Trainer every example supports.
			require.LessOrEqual(t, s.NeedsMinor, minorOf(tr), "the stack's Trainer %s is older than %s needs", tr, s.Name)
			ns := stack.Namespace(t)
			for _, secret := range s.Secrets {
				secret.Namespace = ns
				require.NoError(t, stack.Client.Create(t.Context(), secret))
			}
			stack.KueueQueueNamed(t, ns, s.LocalQueue, 0)
			r := stack.StartExecutor(t, bin, ns, string(s.Bytes), timeout).Result(t)
			require.Equal(t, cli.ExitSucceeded, r.Code, "stderr:\n%s\nstdout:\n%s", r.Stderr, r.Stdout)
			assert.Equal(t, "Succeeded", r.Outputs["phase"])
			assert.Contains(t, r.Outputs, "queue-wait-seconds", "the step says how long Kueue held it")
			jobs := testenv.TrainJobs(t.Context(), t, stack.Client, ns)
			require.Len(t, jobs, 1, "one TrainJob per run")
			assert.Equal(t, s.LocalQueue, jobs[0].Labels[trainjob.LabelKueueQueue], "the TrainJob is in the header's LocalQueue")
		})
	}
	require.Positive(t, ran, "no step example names a Kueue LocalQueue")
}

// TestArgoExampleRunsAsWrittenWithTheGateOff: examples/workflows/argo-train-dag.yaml as its
// header says, every pod really run, on this stack's Trainer with its TrainJobStatus gate off (its
// default; test/realstack/argo runs it with the gate on): the metric it declares is there, empty,
// and the pipeline still succeeds with the function's return value.
func TestArgoExampleRunsAsWrittenWithTheGateOff(t *testing.T) {
	t.Parallel()
	t.Cleanup(func() {
		if t.Failed() {
			var b strings.Builder
			argo.DumpLogs(&b)
			if err := served.Err(); err != nil {
				fmt.Fprintf(&b, "running the served pods: %v\n", err)
			}
			t.Log(b.String())
		}
	})
	argoharness.RunDAGExample(t, argo, stack, false)
}
