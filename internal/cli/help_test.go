package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The help a user at a prompt reads names the paths the engines really read outputs from.
func TestHelpShowsExamplesWithTheEnginesPaths(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"Examples:", "executor run -f train.yaml --local", "source <(executor completion bash)"}},
		{[]string{"run", "--help"}, []string{
			"Examples:",
			"executor run -f train.yaml --dry-run",
			"--output-dir /tmp/outputs", "valueFrom.path: /tmp/outputs/<name>",
			"--output-dir /tekton/results", "/tekton/results/<name>", "$(results.<name>.path)",
			"--owner-uid '$(context.taskRun.uid)'",
		}},
		{[]string{"completion", "--help"}, []string{"bash", "zsh", "fish"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := MainWith(t.Context(), tc.args, strings.NewReader(""), &stdout, &stderr, Overrides{})
			require.Equal(t, ExitSucceeded, code, "stderr: %s", stderr.String())
			for _, w := range tc.want {
				assert.Contains(t, stdout.String(), w)
			}
		})
	}
}

// The flag help says what each flag takes: pflag makes a `quoted` word of the usage the flag's
// value name, which turned --run's into "--run argo retry".
func TestRunFlagsHaveTheirValueNames(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, ExitSucceeded, MainWith(t.Context(), []string{"run", "--help"}, strings.NewReader(""), &stdout, &stderr, Overrides{}))
	assert.Contains(t, stdout.String(), "--run string")
	assert.Contains(t, stdout.String(), "--output-dir string")
}

// Completion offers the step files, and --runtimes-from's three values.
func TestCompletionOffersWhatFlagsTake(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", "run", "--runtimes-from", ""}, []string{"auto", "cluster", "stock"}},
		{[]string{"__complete", "run", "-f", ""}, []string{"yaml", "json"}},
		{[]string{"__complete", "r"}, []string{"run", "runtimes"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			require.Equal(t, ExitSucceeded, MainWith(t.Context(), tc.args, strings.NewReader(""), &stdout, &stderr, Overrides{}))
			var got []string // each line is a candidate, then a tab and its description
			for _, l := range strings.Split(stdout.String(), "\n") {
				got = append(got, strings.SplitN(l, "\t", 2)[0])
			}
			for _, w := range tc.want {
				assert.Contains(t, got, w)
			}
		})
	}
}
