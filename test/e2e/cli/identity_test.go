package cli_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

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
