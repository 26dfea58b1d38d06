package local

import (
	"fmt"
	"path/filepath"
	"regexp"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainers"
	"github.com/trainstep/trainstep/core/trainjob"
)

func TestCheckpointDirIsOnePerOwnerAndStepKey(t *testing.T) {
	cases := map[string]struct {
		owner, key string
		want       string // relative to the root; "" when only checked for shape
	}{
		"plain":             {owner: "3f1c", key: "train", want: "3f1c/train"},
		"no owner, no key":  {want: "local/run"},
		"an Argo node name": {owner: "u", key: "wf.train(0)[1]", want: "u/wf.train_0_1-"},
		"a path in the key": {owner: "u", key: "../../etc", want: "u/etc-"},
		"dots alone":        {owner: "u", key: "..", want: "u/-"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := CheckpointDir("/state", tc.owner, tc.key)
			rel, err := filepath.Rel("/state", got)
			require.NoError(t, err)
			assert.Regexp(t, "^"+regexpQuote(tc.want), rel)
			assert.Equal(t, 2, len(splitPath(rel)), "owner/key, nothing above or below: %s", rel)
			assert.Equal(t, got, CheckpointDir("/state", tc.owner, tc.key), "every attempt gets the same directory")
		})
	}
	assert.NotEqual(t, CheckpointDir("/s", "u", "a/b"), CheckpointDir("/s", "u", "a_b"), "keys made safe stay apart")
	assert.NotEqual(t, CheckpointDir("/s", "u1", "k"), CheckpointDir("/s", "u2", "k"))
}

// A step's content key is the same for the same step however its file is written, and for one
// whose timeouts, retries or labels changed; any change to what it trains gives another.
func TestContentKeyTellsStepsApart(t *testing.T) {
	const base = "framework: torch\ntrainer: {func: 'def f(lr): pass', funcArgs: {lr: 0.1, epochs: 3}}\n"
	key := func(t *testing.T, file string) string {
		t.Helper()
		spec, err := step.Parse([]byte(file))
		require.NoError(t, err)
		k, err := ContentKey(spec)
		require.NoError(t, err)
		return k
	}
	want := key(t, base)
	assert.Regexp(t, `^step-[0-9a-f]{12}$`, want)
	for name, file := range map[string]string{
		"reordered and reformatted": "trainer:\n  funcArgs: {epochs: 3, lr: 0.1}\n  func: 'def f(lr): pass'\nframework: torch\n",
		"a longer timeout, retries": base + "timeout: 2h\nhangTimeout: 10m\nretry: {limit: 2}\n",
		"labels and a name prefix":  base + "labels: {team: a}\nnamePrefix: nightly\nqueueName: q\n",
	} {
		assert.Equal(t, want, key(t, file), "%s: the same step", name)
	}
	for name, file := range map[string]string{
		"another argument": "framework: torch\ntrainer: {func: 'def f(lr): pass', funcArgs: {lr: 0.2, epochs: 3}}\n",
		"another function": "framework: torch\ntrainer: {func: 'def g(lr): pass', funcArgs: {lr: 0.1, epochs: 3}}\n",
		"another runtime":  base + "runtime: {name: my-torch}\n",
	} {
		assert.NotEqual(t, want, key(t, file), "%s: another step", name)
	}
}

func TestCheckpointRoot(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/xdg")
	got, err := CheckpointRoot()
	require.NoError(t, err)
	assert.Equal(t, "/xdg/trainstep/checkpoints", got)
	t.Setenv("XDG_STATE_HOME", "relative") // the spec says to ignore a relative one
	t.Setenv("HOME", "/home/me")
	got, err = CheckpointRoot()
	require.NoError(t, err)
	assert.Equal(t, "/home/me/.local/state/trainstep/checkpoints", got)
}

func splitPath(p string) []string {
	dir, file := filepath.Split(p)
	if dir == "" {
		return []string{file}
	}
	return append(splitPath(filepath.Clean(dir)), file)
}

func regexpQuote(s string) string { return regexp.QuoteMeta(s) }

// Every node gets the step's local checkpoint directory in place of the cluster's, and the
// attempt; what rank 0 says it resumed from is the run's, in its outputs and message.
func TestRunGivesTheCheckpointDirAndReadsWhatRank0ResumedFrom(t *testing.T) {
	ckpt := t.TempDir()
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "local"}, Spec: trainer.TrainJobSpec{Trainer: &trainer.Trainer{
		NumNodes: ptr.To[int32](2),
		Env:      []corev1.EnvVar{{Name: step.CheckpointDirEnv, Value: "/mnt/ckpt/checkpoints"}},
		Command: []string{"bash", "-c", `echo "node $JAX_PROCESS_ID: $` + step.CheckpointDirEnv + ` attempt $` + step.AttemptEnv + `"
if [ "$JAX_PROCESS_ID" = 0 ]; then echo "` + trainers.ResumedFromLine + `$` + step.CheckpointDirEnv + `/step-400"; fi`},
	}}}
	var seen []trainjob.Observation
	r := &Runner{CheckpointDir: ckpt, Attempt: 2, OnProgress: func(o trainjob.Observation) { seen = append(seen, o) }}
	res, err := r.Run(t.Context(), tj, &runtimes.Runtime{Name: "jax-distributed", Policy: runtimes.PolicyJAX, NumNodes: 1})
	require.NoError(t, err)
	for i, n := range res.Nodes {
		assert.Contains(t, n.Log, fmt.Sprintf("node %d: %s attempt 2", i, ckpt))
	}
	assert.Equal(t, filepath.Join(ckpt, "step-400"), res.ResumedFrom)
	obs := res.Observe()
	assert.Equal(t, "2", obs.Outputs()[trainjob.OutAttempt])
	assert.Equal(t, filepath.Join(ckpt, "step-400"), obs.Outputs()[trainjob.OutResumedFrom])
	assert.Equal(t, "jobset completed successfully; resumed from step 400 (attempt 2)", obs.Message)
	require.Len(t, seen, 1, "the line is shown as soon as it is said")
	assert.Contains(t, seen[0].Message, "running: 2/2 nodes; resumed from step 400 (attempt 2)")
}
