package cli_test

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/test/internal/examples"
)

// TestEveryLocalStepExampleRunsAsWritten runs each file under examples/steps whose header runs it
// with --local: its commands in order, as written, with the real binary and a home of its own
// (no kubeconfig, so no cluster: the embedded runtimes). Every command but the last is an attempt
// the header says fails; the last succeeds. What a header promises beyond that is checked per
// file below. The other step examples run in test/realstack and test/conformance.
func TestEveryLocalStepExampleRunsAsWritten(t *testing.T) {
	steps, err := examples.Steps()
	require.NoError(t, err)
	ran := 0
	for _, s := range steps {
		if !s.Local {
			continue
		}
		ran++
		t.Run(s.Name, func(t *testing.T) {
			home := t.TempDir()
			t.Setenv("HOME", home)
			t.Setenv("XDG_STATE_HOME", "")
			t.Setenv("KUBECONFIG", "")
			var last result
			for i, run := range s.Runs {
				args := strings.Fields(run)[1:] // the binary is bin
				for j, a := range args {
					if a == "examples/steps/"+s.Name {
						args[j] = filepath.Join("..", "..", "..", a)
					}
				}
				last = executor(t, args...)
				if i < len(s.Runs)-1 {
					require.Equal(t, cli.ExitFailed, last.code, "%s: an attempt the header says fails\nstderr:\n%s", run, last.stderr)
				}
			}
			require.Equal(t, cli.ExitSucceeded, last.code, "the last command\nstderr:\n%s", last.stderr)
			assert.Equal(t, "Succeeded", last.outputs["phase"])
			checkLocalExample(t, s.Name, home, last)
		})
	}
	require.Positive(t, ran, "no step example runs with --local")
}

// checkLocalExample checks what a local example's header promises beyond success.
func checkLocalExample(t *testing.T, name, home string, r result) {
	t.Helper()
	require.Equal(t, "resume-from-checkpoint.yaml", name, "a local example with no check of what its header promises: add one here")
	// "says resumed from step 10 (attempt 1), trains steps 11 to 20 and returns the weight an
	// uninterrupted run returns"; the checkpoints stay where the header says.
	assert.Contains(t, r.outputs["message"], "resumed from step 10 (attempt 1)")
	assert.Equal(t, "1", r.outputs["attempt"])
	dir := filepath.Join(home, ".local", "state", "trainstep", "checkpoints", "demo", "train")
	assert.Equal(t, filepath.Join(dir, "step-10"), r.outputs["resumed-from"])
	assert.DirExists(t, filepath.Join(dir, "step-20"))
	assert.Equal(t, "10", r.outputs["result-started-at-step"])
	w := 1
	for s := range 20 {
		w = (w*31 + s*s) % 1000003
	}
	assert.Equal(t, strconv.Itoa(w), r.outputs["result-w"], "the weight of a run never interrupted")
}
