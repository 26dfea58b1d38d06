package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// resumeStep trains deterministically for 20 steps, saving every 5 with save_checkpoint and on
// SIGTERM with on_sigterm, and resumes from TRAINSTEP_RESUME_FROM. On attempt 0 only it sends
// itself the signal SIGNAL at step 13: the kill is part of the program, so no test
// races a process. It returns its weight and where it started.
const resumeStep = `framework: xgboost
trainer:
  funcArgs: {signal: SIGNAL}
  func: |
    def train(signal, total=20, every=5, die_at=13):
        import json, os
        import signal as sig
        state = {"step": 0, "w": 1}
        resume = os.environ.get("TRAINSTEP_RESUME_FROM")
        if resume:
            with open(os.path.join(resume, "state.json")) as f:
                state = json.load(f)
        start = state["step"]

        def write(d):
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump(state, f)

        on_sigterm(lambda: save_checkpoint(state["step"], write))
        while state["step"] < total:
            s = state["step"]
            if s == die_at and os.environ["TRAINSTEP_ATTEMPT"] == "0":
                os.kill(os.getpid(), getattr(sig, signal))
            # One assignment: the state on_sigterm saves is whole at every statement.
            state = {"step": s + 1, "w": (state["w"] * 31 + s * s) % 1000003}
            if state["step"] % every == 0:
                save_checkpoint(state["step"], write)
        return {"w": state["w"], "start": start}
`

// runLocalStep runs the step under --local and returns its exit code and its outputs.
func runLocalStep(t *testing.T, file string, args ...string) (int, map[string]string) {
	t.Helper()
	code, outs, _ := runLocalStepSaying(t, file, args...)
	return code, outs
}

// runLocalStepSaying is runLocalStep that also returns what trainstep said on stderr.
func runLocalStepSaying(t *testing.T, file string, args ...string) (int, map[string]string, string) {
	t.Helper()
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	argv := append([]string{"run", "-f", file, "--local", "--runtimes-from", "stock", "--no-logs", "--output-dir", out}, args...)
	code := MainWith(t.Context(), argv, strings.NewReader(""), &stdout, &stderr, Overrides{})
	outs := map[string]string{}
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(out, e.Name()))
		require.NoError(t, err)
		outs[e.Name()] = string(b)
	}
	t.Logf("executor %s: exit %d\n%s", strings.Join(args, " "), code, stderr.String())
	return code, outs, stderr.String()
}

// A step killed mid-training on attempt 0 is retried as attempt 1 of the same owner and step
// key, resumes from its newest complete checkpoint, and ends exactly where an uninterrupted run
// ends. SIGKILL loses what came after the last periodic save (step 10 of 13); SIGTERM loses
// nothing: on_sigterm saved step 13.
func TestLocalRetryResumesFromTheLastCheckpoint(t *testing.T) {
	cases := map[string]struct {
		signal     string
		wantFrom   string
		wantStart  int
		exitCode   string                                    // what attempt 0's node exits with, as a container's would
		checkpoint func(t *testing.T, state string) []string // the flag, and the root it names
	}{
		"SIGKILL": {signal: "SIGKILL", wantFrom: "step-10", wantStart: 10, exitCode: "137",
			checkpoint: func(t *testing.T, state string) []string {
				t.Setenv("XDG_STATE_HOME", state)
				return []string{"", filepath.Join(state, "trainstep", "checkpoints")}
			}},
		"SIGTERM": {signal: "SIGTERM", wantFrom: "step-13", wantStart: 13, exitCode: "143",
			checkpoint: func(t *testing.T, state string) []string {
				return []string{"--checkpoint-dir=" + state, state}
			}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			noCluster(t)
			file := filepath.Join(t.TempDir(), "step.yaml")
			require.NoError(t, os.WriteFile(file, []byte(strings.Replace(resumeStep, "SIGNAL", tc.signal, 1)), 0o644))
			ck := tc.checkpoint(t, t.TempDir())
			flags := func(owner string, attempt int) []string {
				f := []string{"--owner-uid", owner, "--step-key", "train", "--attempt", strconv.Itoa(attempt)}
				if ck[0] != "" {
					f = append(f, ck[0])
				}
				return f
			}

			code, outs := runLocalStep(t, file, flags("wf-1", 0)...)
			require.Equal(t, ExitFailed, code, "attempt 0 dies at step 13")
			assert.Equal(t, "Failed", outs["phase"])
			assert.Contains(t, outs["message"], "node-0 exited with code "+tc.exitCode)
			assert.Equal(t, "0", outs["attempt"])
			assert.Empty(t, outs["resumed-from"], "attempt 0 had nothing to resume")
			dir := filepath.Join(ck[1], "wf-1", "train")
			assert.DirExists(t, filepath.Join(dir, tc.wantFrom), "the checkpoint the retry is to resume")

			code, outs = runLocalStep(t, file, flags("wf-1", 1)...)
			require.Equal(t, ExitSucceeded, code)
			assert.Equal(t, "1", outs["attempt"])
			assert.Equal(t, filepath.Join(dir, tc.wantFrom), outs["resumed-from"])
			assert.Equal(t, strconv.Itoa(tc.wantStart), outs["result-start"])
			assert.Contains(t, outs["message"], "resumed from "+strings.Replace(tc.wantFrom, "-", " ", 1)+" (attempt 1)")

			code, clean := runLocalStep(t, file, flags("wf-2", 1)...)
			require.Equal(t, ExitSucceeded, code)
			assert.Empty(t, clean["resumed-from"], "another owner's step starts afresh")
			assert.Equal(t, "0", clean["result-start"])
			assert.Equal(t, clean["result-w"], outs["result-w"], "the resumed run ends exactly where an uninterrupted one does")
		})
	}
}

// Without --owner-uid and --step-key the checkpoint directory is the step's own: the same step
// file run again resumes from it, another step (here: another function argument) starts afresh
// beside it instead of resuming the first one's checkpoint. The first line says where it is.
func TestLocalStepsWithoutAKeyKeepTheirOwnCheckpoints(t *testing.T) {
	noCluster(t)
	root := t.TempDir()
	write := func(signal string) string {
		f := filepath.Join(t.TempDir(), "step.yaml")
		require.NoError(t, os.WriteFile(f, []byte(strings.Replace(resumeStep, "SIGNAL", signal, 1)), 0o644))
		return f
	}
	first, other := write("SIGKILL"), write("SIGTERM")
	dirOf := func(stderr string) string {
		line, _, _ := strings.Cut(stderr, "\n")
		rest, ok := strings.CutPrefix(line, "trainstep: checkpoints in ")
		assert.True(t, ok, "the first line says where the checkpoints are: %q", line)
		dir, _, _ := strings.Cut(rest, " ")
		return dir
	}

	code, _, said := runLocalStepSaying(t, first, "--checkpoint-dir", root)
	require.Equal(t, ExitFailed, code, "attempt 0 dies at step 13")
	dir := dirOf(said)
	assert.Equal(t, filepath.Join(root, "local"), filepath.Dir(dir))
	assert.DirExists(t, filepath.Join(dir, "step-10"))

	code, outs, said := runLocalStepSaying(t, other, "--checkpoint-dir", root, "--attempt", "1")
	require.Equal(t, ExitSucceeded, code)
	assert.NotEqual(t, dir, dirOf(said), "another step gets another directory")
	assert.Empty(t, outs["resumed-from"], "another step does not resume the first one's checkpoint")
	assert.Equal(t, "0", outs["result-start"])

	code, outs, said = runLocalStepSaying(t, first, "--checkpoint-dir", root, "--attempt", "1")
	require.Equal(t, ExitSucceeded, code)
	assert.Equal(t, dir, dirOf(said), "the same step gets the same directory")
	assert.Equal(t, filepath.Join(dir, "step-10"), outs["resumed-from"])
	assert.Equal(t, "10", outs["result-start"])
}
