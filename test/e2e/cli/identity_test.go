package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/test/internal/previous"
	"github.com/trainstep/trainstep/test/internal/testenv"
	"github.com/trainstep/trainstep/test/internal/trainersim"
)

// TestUpgradeMidStepAdoptsThePreviousReleasesTrainJob: a pipeline step started under the
// release before 1 Dec 2026, whose TrainJob is named and labelled as that release did (its key,
// an Argo node name, is cut differently now), is restarted with this release's binary (the
// container restarted on an upgraded image): it finds that TrainJob by its identity labels,
// follows it to the end and reports it, and starts no second one.
func TestUpgradeMidStepAdoptsThePreviousReleasesTrainJob(t *testing.T) {
	ns := env.Namespace(t)
	const key, owner = "train-dag-x7k2p.train-model", "wf-upgrade"
	f := writeStep(t, holdStep)
	pipeline := []string{"--step-key", key, "--owner-uid", owner}
	old := previous.Identity{Engine: "cli", OwnerUID: owner, StepKey: key}

	// The TrainJob the previous release made for the step, still running.
	cmd, stdout, stderr := command(t, onCluster(ns, f, append([]string{"--dry-run"}, pipeline...)...)...)
	require.NoError(t, cmd.Run(), stderr.String())
	tj := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal(stdout.Bytes(), &tj.Object))
	old.Stamp(tj)
	require.NoError(t, env.Client.Create(t.Context(), tj))

	out := t.TempDir()
	run, _, stderr := command(t, onCluster(ns, f, append(pipeline, "--output-dir", out)...)...)
	require.NoError(t, run.Start())
	t.Cleanup(func() { _ = run.Process.Signal(syscall.SIGKILL); _ = run.Wait() })
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "Running:") }, testenv.Timeout, testenv.Interval, stderr.String)
	assert.Contains(t, stderr.String(), "found existing TrainJob "+ns+"/"+old.Name())
	require.Equal(t, []string{old.Name()}, names(testenv.TrainJobs(t.Context(), t, env.Client, ns)), "no second TrainJob")

	// The job ends; this release reports it.
	finish(t, ns, old.Name(), "succeed")
	require.NoError(t, run.Wait(), stderr.String())
	for name, want := range map[string]string{"trainjob-name": old.Name(), "phase": "Succeeded", "num-nodes": "1"} {
		got, err := os.ReadFile(filepath.Join(out, name))
		require.NoError(t, err)
		assert.Equal(t, want, string(got), name)
	}
	assert.Equal(t, []string{old.Name()}, names(testenv.TrainJobs(t.Context(), t, env.Client, ns)), "no second TrainJob")
}

func names(tjs []trainer.TrainJob) []string {
	out := make([]string, 0, len(tjs))
	for _, tj := range tjs {
		out = append(out, tj.Name)
	}
	return out
}

// TestRunPartTellsRunsApart: --run is the part of the identity `argo retry` changes (the step
// pod's UID) and a restarted container keeps: the same run finds its TrainJob, another run of the
// same owner, key and attempt gets a new one.
func TestRunPartTellsRunsApart(t *testing.T) {
	ns := env.Namespace(t)
	f := writeStep(t, "framework: jax\nlabels: {sim-mode: succeed}\ntrainer: {func: \"def f(): pass\"}\n")
	args := onCluster(ns, f, "--step-key", "train-dag-x7k2p.train", "--owner-uid", "wf-retry", "--attempt", "0")
	first := executor(t, append(args, "--run", "pod-uid-1")...)
	require.Equal(t, cli.ExitSucceeded, first.code, first.stderr)
	again := executor(t, append(args, "--run", "pod-uid-1")...)
	require.Equal(t, cli.ExitSucceeded, again.code, again.stderr)
	assert.Contains(t, again.stderr, "found existing TrainJob")
	assert.Equal(t, first.outputs["trainjob-name"], again.outputs["trainjob-name"], "the same run adopts its TrainJob")
	retried := executor(t, append(args, "--run", "pod-uid-2")...)
	require.Equal(t, cli.ExitSucceeded, retried.code, retried.stderr)
	assert.Contains(t, retried.stderr, "created TrainJob")
	assert.NotEqual(t, first.outputs["trainjob-name"], retried.outputs["trainjob-name"], "a new run trains again")
	tjs := testenv.TrainJobs(t.Context(), t, env.Client, ns)
	require.Len(t, tjs, 2)
	for _, tj := range tjs {
		assert.NotEmpty(t, tj.Labels["trainstep.dev/run"], "the run is recorded as a label")
	}
}

// finish tells the Trainer simulator what a held job does now (its sim-mode label).
func finish(t *testing.T, ns, name, mode string) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		tj := &trainer.TrainJob{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
			return err
		}
		tj.Labels[trainersim.ModeLabel] = mode
		return env.Client.Update(t.Context(), tj)
	}))
}
