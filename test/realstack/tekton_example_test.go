package realstack_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/test/internal/examples"
	"github.com/trainstep/trainstep/test/internal/podrunner"
	"github.com/trainstep/trainstep/test/internal/realstack"
	"github.com/trainstep/trainstep/test/internal/tektonharness"
)

// TestTektonExampleRunsWithTheGateOff: examples/workflows/tekton-train-pipeline.yaml runs as its
// header says on a Trainer whose TrainJobStatus gate is off (this suite's stack; the default of
// Trainer v2.2 and v2.3), every pod really run: tektonharness.RunExample says what is proved; here
// report() finds no status server and the train task has no metric-loss result, which the
// example does not read. test/realstack/tekton runs it with the gate on. Tekton's controller and
// trainstep's run for this test alone.
func TestTektonExampleRunsWithTheGateOff(t *testing.T) {
	require.False(t, stack.TrainJobStatus(), "this suite's Trainer runs with the gate off")
	const file = "../../examples/workflows/tekton-train-pipeline.yaml"
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	needs, ok := examples.NeedsTrainerMinor(b)
	require.True(t, ok, "%s: the header says which Kubeflow Trainer release it needs", file)
	if minorOf(trainerRelease(t)) < needs {
		// An older release has no XGBoost runtime: the step is refused; its own suites cover that.
		realstack.Lacks(t, "Trainer %s is older than the v2.%d the Tekton example says it needs: not run", trainerRelease(t), needs)
		return
	}
	tk, err := tektonharness.StartOnStack(t.Context(), stack)
	require.NoError(t, err)
	t.Cleanup(tk.Stop)
	opts, err := stack.PodRunnerOptions()
	require.NoError(t, err)
	images, err := tektonharness.PodImages()
	require.NoError(t, err)
	opts.Images = append(opts.Images, images...)
	pods, err := podrunner.New(t.Context(), opts)
	require.NoError(t, err)
	served := stack.ServePods(context.WithoutCancel(t.Context()), pods)
	t.Cleanup(func() {
		assert.NoError(t, served.Stop(), "running the served pods")
		assert.NoError(t, pods.Close())
	})
	t.Cleanup(func() {
		if t.Failed() {
			var b strings.Builder
			pods.DumpLogs(&b, 40)
			t.Logf("Tekton controller log (end):\n%s\nserved pods:\n%s", tk.Controller.LogTail(8000), b.String())
		}
	})
	tektonharness.RunExample(t, tk.Client, stack, pods)
}
