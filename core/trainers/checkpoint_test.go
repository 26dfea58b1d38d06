package trainers

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/core/step"
)

// resumeFrom is a function that returns what the script offered it.
const resumeFrom = "def train():\n    import os\n    return os.environ.get('" + step.ResumeFromEnv + "')\n"

// The script offers the newest complete checkpoint, by step number, of either layout, and
// nothing a save left half-written.
func TestScriptOffersTheNewestCompleteCheckpoint(t *testing.T) {
	cases := map[string]struct {
		dirs  map[string][]string // directory → files in it
		env   []string
		want  string // the directory offered; "" for none
		noDir bool
	}{
		"no checkpoint dir":                    {noDir: true},
		"empty":                                {},
		"a stale value is cleared":             {env: []string{step.ResumeFromEnv + "=/old/step-1"}},
		"complete, and one without its marker": {dirs: map[string][]string{"step-100": {CheckpointMarker, "w"}, "step-200": {"w"}}, want: "step-100"},
		"by number, not by name":               {dirs: map[string][]string{"step-9": {CheckpointMarker}, "step-10": {CheckpointMarker}}, want: "step-10"},
		"Hugging Face's, newer":                {dirs: map[string][]string{"step-40": {CheckpointMarker}, "checkpoint-50": {"trainer_state.json", "model.safetensors"}}, want: "checkpoint-50"},
		"Hugging Face's without trainer_state": {dirs: map[string][]string{"step-40": {CheckpointMarker}, "checkpoint-300": {"model.safetensors"}}, want: "step-40"},
		"Hugging Face's JIT save cut short": {dirs: map[string][]string{"step-40": {CheckpointMarker},
			"checkpoint-300": {"trainer_state.json", "checkpoint-is-incomplete.txt"}}, want: "step-40"},
		"a save in progress is no checkpoint": {dirs: map[string][]string{"step-1": {CheckpointMarker}, ".trainstep-step-500-x": {CheckpointMarker}}, want: "step-1"},
		"other names":                         {dirs: map[string][]string{"step-x": {CheckpointMarker}, "best": {CheckpointMarker}, "step-7.bak": {CheckpointMarker}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			for d, files := range tc.dirs {
				require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
				for _, f := range files {
					require.NoError(t, os.WriteFile(filepath.Join(root, d, f), []byte("x"), 0o644))
				}
			}
			env := tc.env
			if !tc.noDir {
				env = append(env, step.CheckpointDirEnv+"="+root)
			}
			out, msg, err := runResult(t, resumeFrom, env...)
			require.NoError(t, err, out)
			if tc.want == "" {
				assert.Empty(t, msg, "nothing offered: the variable is unset")
				assert.NotContains(t, out, ResumedFromLine)
				return
			}
			want := filepath.Join(root, tc.want)
			assert.JSONEq(t, `{"`+ResultMarker+`": "`+want+`", "`+ResumedFromMarker+`": "`+want+`"}`, msg, "returned, and written beside it for the face")
			assert.Contains(t, out, ResumedFromLine+want+"\n")
		})
	}
}

// Only rank 0 says what it resumed from; every rank is offered it.
func TestScriptOffersTheCheckpointOnEveryRank(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "step-3"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "step-3", CheckpointMarker), nil, 0o644))
	out, _, err := runResult(t, "def train():\n    import os, sys\n    sys.exit(0 if os.environ.get('"+step.ResumeFromEnv+"') else 3)\n",
		step.CheckpointDirEnv+"="+root, "RANK=1")
	require.NoError(t, err, out)
	assert.NotContains(t, out, ResumedFromLine)
}

// saveSource saves the steps it is given, each with one file, and returns what is left.
const saveSource = `
def _save(steps, keep=None, fail_at=None):
    import os
    paths = []
    for s in steps:
        def write(d, s=s):
            with open(os.path.join(d, "model.txt"), "w") as f:
                f.write("weights at %d" % s)
            if s == fail_at:
                raise ValueError("disk full")
        paths.append(save_checkpoint(s, write, keep=keep))
    root = os.environ["TRAINSTEP_CHECKPOINT_DIR"]
    return {"saved": paths, "left": sorted(os.listdir(root)), "latest": latest_checkpoint()}
`

func runSave(t *testing.T, args string, env ...string) (out string, got map[string]any, err error) {
	t.Helper()
	out, msg, err := runResult(t, saveSource+"\n\ndef train():\n    return _save("+args+")\n", env...)
	if msg != "" {
		var body map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(msg), &body), msg)
		require.NoError(t, json.Unmarshal(body[ResultMarker], &got), msg)
	}
	return out, got, err
}

func TestSaveCheckpoint(t *testing.T) {
	t.Run("each step whole, with its marker, nothing else left", func(t *testing.T) {
		root := t.TempDir()
		out, got, err := runSave(t, "[100, 200]", step.CheckpointDirEnv+"="+root)
		require.NoError(t, err, out)
		assert.Equal(t, []any{filepath.Join(root, "step-100"), filepath.Join(root, "step-200")}, got["saved"])
		assert.Equal(t, []any{"step-100", "step-200"}, got["left"])
		assert.Equal(t, filepath.Join(root, "step-200"), got["latest"])
		b, err := os.ReadFile(filepath.Join(root, "step-200", "model.txt"))
		require.NoError(t, err)
		assert.Equal(t, "weights at 200", string(b))
		assert.FileExists(t, filepath.Join(root, "step-200", CheckpointMarker))
	})
	t.Run("the same step again replaces it", func(t *testing.T) {
		root := t.TempDir()
		out, got, err := runSave(t, "[5, 5]", step.CheckpointDirEnv+"="+root)
		require.NoError(t, err, out)
		assert.Equal(t, []any{"step-5"}, got["left"])
	})
	t.Run("keep prunes the oldest of its own", func(t *testing.T) {
		root := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(root, "checkpoint-1"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, "checkpoint-1", "trainer_state.json"), nil, 0o644))
		out, got, err := runSave(t, "[1, 2, 3, 4], keep=2", step.CheckpointDirEnv+"="+root)
		require.NoError(t, err, out)
		assert.Equal(t, []any{"checkpoint-1", "step-3", "step-4"}, got["left"], "Hugging Face's are not the helper's to delete")
	})
	t.Run("a write that fails leaves nothing to resume", func(t *testing.T) {
		root := t.TempDir()
		out, _, err := runSave(t, "[1, 2], fail_at=2", step.CheckpointDirEnv+"="+root)
		require.Error(t, err)
		assert.Contains(t, out, "ValueError: disk full")
		entries, rerr := os.ReadDir(root)
		require.NoError(t, rerr)
		require.Len(t, entries, 1, "no half-written step-2, no temporary directory")
		assert.Equal(t, "step-1", entries[0].Name())
	})
	t.Run("a save a kill cut short is cleared by the next", func(t *testing.T) {
		root := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(root, ".trainstep-step-9-abc"), 0o755))
		out, got, err := runSave(t, "[10]", step.CheckpointDirEnv+"="+root)
		require.NoError(t, err, out)
		assert.Equal(t, []any{"step-10"}, got["left"])
	})
	t.Run("only rank 0 saves", func(t *testing.T) {
		root := t.TempDir()
		out, got, err := runSave(t, "[1]", step.CheckpointDirEnv+"="+root, "RANK=1")
		require.NoError(t, err, out)
		assert.Nil(t, got, "rank 1 writes no result either")
		entries, _ := os.ReadDir(root)
		assert.Empty(t, entries)
	})
	t.Run("a negative step is refused", func(t *testing.T) {
		root := t.TempDir()
		out, _, err := runSave(t, "[-1]", step.CheckpointDirEnv+"="+root)
		require.Error(t, err)
		assert.Contains(t, out, "step must be 0 or more, not -1")
	})
	t.Run("without a checkpoint dir it says how to get one", func(t *testing.T) {
		out, _, err := runSave(t, "[1]")
		require.Error(t, err)
		assert.Contains(t, out, "TRAINSTEP_CHECKPOINT_DIR is not set; give the step a checkpoint block")
	})
}

// on_sigterm's function runs on SIGTERM, and the process then exits 143 without going on.
func TestOnSigtermSavesThenExits(t *testing.T) {
	root := t.TempDir()
	src := `
def train():
    import os, signal
    state = {"step": 7}
    def write(d):
        with open(os.path.join(d, "step.txt"), "w") as f:
            f.write(str(state["step"]))
    on_sigterm(lambda: save_checkpoint(state["step"], write))
    os.kill(os.getpid(), signal.SIGTERM)
    state["step"] = 8
    return "went on after SIGTERM"
`
	out, msg, err := runResult(t, src, step.CheckpointDirEnv+"="+root)
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, out)
	assert.Equal(t, 143, exit.ExitCode())
	assert.Empty(t, msg)
	b, rerr := os.ReadFile(filepath.Join(root, "step-7", "step.txt"))
	require.NoError(t, rerr, out)
	assert.Equal(t, "7", string(b))
	assert.FileExists(t, filepath.Join(root, "step-7", CheckpointMarker))
}

// A source that defines a helper's name keeps its own.
func TestScriptKeepsTheSourcesOwnCheckpointHelpers(t *testing.T) {
	out, msg, err := runResult(t, "def latest_checkpoint():\n    return 'mine'\n\ndef train():\n    return latest_checkpoint()\n")
	require.NoError(t, err, out)
	assert.JSONEq(t, `{"`+ResultMarker+`": "mine"}`, msg)
}

// Where the Trainer serves progress, rank 0 posts the checkpoint it resumed from at once and
// with every report() after (the server replaces the whole trainerStatus at each post), so a
// face can say it while the job runs; where it serves none, the script says nothing more.
func TestScriptReportsTheCheckpointItResumedFrom(t *testing.T) {
	resumed := map[string]any{"name": ResumedFromMetric, "value": "step-400"}
	for name, tc := range map[string]struct {
		env     []string
		server  bool
		want    []map[string]any
		wantOut string
	}{
		"rank 0": {server: true, want: []map[string]any{
			{"metrics": []any{resumed}},
			{"progressPercentage": 10.0, "metrics": []any{map[string]any{"name": "loss", "value": "0.5"}, map[string]any{"name": ReportsMetric, "value": "1"}, resumed}},
		}},
		"another rank":   {server: true, env: []string{"RANK=1"}},
		"with no server": {env: []string{"KUBEFLOW_TRAINER_SERVER_URL="}, wantOut: ResumedFromLine},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			require.NoError(t, os.MkdirAll(filepath.Join(root, "step-400"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(root, "step-400", CheckpointMarker), nil, 0o644))
			env := append([]string{step.CheckpointDirEnv + "=" + root}, tc.env...)
			var rec *statusServer
			if tc.server {
				var server []string
				rec, server = reportEnv(t, 200)
				env = append(server, env...)
			}
			out, _, err := runResult(t, "def train():\n    report(progress=10, loss=0.5)\n    return 1\n", env...)
			require.NoError(t, err, out)
			assert.NotContains(t, out, "not reported")
			if rec != nil {
				_, got := rec.requests()
				assert.Equal(t, tc.want, got)
			}
			assert.Contains(t, out, tc.wantOut)
		})
	}
}
