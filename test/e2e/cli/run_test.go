package cli_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

type result struct {
	code           int
	stdout, stderr string
	outputs        map[string]string
}

func writeStep(t *testing.T, y string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "step.yaml")
	require.NoError(t, os.WriteFile(f, []byte(y), 0o644))
	return f
}

func command(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	return commandIn(t.Context(), args...)
}

func commandIn(ctx context.Context, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr
}

// executor runs the binary and collects its exit code and --output-dir files.
func executor(t *testing.T, args ...string) result {
	t.Helper()
	return executorWithin(t, 0, args...)
}

// executorWithin is executor for a run that must end by itself within d (0: no bound): one
// still running then is killed and the test fails, instead of waiting for the test's timeout.
func executorWithin(t *testing.T, d time.Duration, args ...string) result {
	t.Helper()
	ctx := t.Context()
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	outDir := filepath.Join(t.TempDir(), "outputs")
	cmd, stdout, stderr := commandIn(ctx, append(args, "--output-dir", outDir)...)
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "the run did not end within %s; stderr:\n%s", d, stderr)
	r := result{stdout: stdout.String(), stderr: stderr.String(), outputs: map[string]string{}}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	entries, _ := os.ReadDir(outDir)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(outDir, e.Name()))
		require.NoError(t, err)
		r.outputs[e.Name()] = string(b)
	}
	return r
}

func onCluster(ns, file string, extra ...string) []string {
	return append([]string{"run", "-f", file, "--kubeconfig", env.Kubeconfig, "-n", ns}, extra...)
}

const xgbStep = `
framework: xgboost
trainer:
  numNodes: 2
  funcArgs: {epochs: 3}
  func: |
    def train(epochs):
        import os
        for e in range(epochs):
            print("rank", os.environ["DMLC_TASK_ID"], "epoch", e)
`

func TestSucceedsWithEveryOutput(t *testing.T) {
	ns := env.Namespace(t)
	r := executor(t, onCluster(ns, writeStep(t, xgbStep))...)
	require.Equal(t, cli.ExitSucceeded, r.code, r.stderr)
	assert.Contains(t, r.stderr, "created TrainJob "+ns+"/")
	assert.Equal(t, "Succeeded", r.outputs["phase"])
	assert.Equal(t, "AllJobsCompleted", r.outputs["reason"])
	assert.Equal(t, "xgboost-distributed", r.outputs["runtime"])
	assert.Equal(t, "xgboost", r.outputs["framework"])
	assert.Equal(t, "2", r.outputs["num-nodes"])
	assert.Equal(t, ns, r.outputs["trainjob-namespace"])
	tjs := testenv.TrainJobs(t.Context(), t, env.Client, ns)
	require.Len(t, tjs, 1)
	assert.Equal(t, tjs[0].Name, r.outputs["trainjob-name"])
	for _, name := range []string{"start-time", "completion-time", "duration-seconds", "message", "metrics", "progress-percentage"} {
		assert.Contains(t, r.outputs, name, "every output is written, even when empty")
	}
	assert.Contains(t, r.stdout, "phase: Succeeded")
}

func TestFailureCarriesTheLogTail(t *testing.T) {
	ns := env.Namespace(t)
	r := executor(t, onCluster(ns, writeStep(t, "framework: jax\nlabels: {sim-mode: fail}\ntrainer: {func: \"def f(): pass\"}"))...)
	assert.Equal(t, cli.ExitFailed, r.code, r.stderr)
	assert.Equal(t, "Failed", r.outputs["phase"])
	assert.Equal(t, "FailedJobs", r.outputs["reason"])
	// The test bed has no kubelet, so the binary cannot read pod logs; it says so instead of
	// failing silently. (The log tail itself is proved with the simulator's log source.)
	assert.Contains(t, r.outputs["message"], "no log tail")
}

func TestTimeoutDeletesTheTrainJob(t *testing.T) {
	ns := env.Namespace(t)
	r := executor(t, onCluster(ns, writeStep(t, "framework: jax\nlabels: {sim-mode: hold}\ntimeout: 2s\ntrainer: {func: \"def f(): pass\"}"))...)
	assert.Equal(t, cli.ExitTimedOut, r.code, r.stderr)
	assert.Equal(t, "TimedOut", r.outputs["phase"])
	require.Eventually(t, func() bool { return len(testenv.TrainJobs(t.Context(), t, env.Client, ns)) == 0 }, testenv.Timeout, testenv.Interval)
}

func TestBadInputNamesTheFieldAndCreatesNothing(t *testing.T) {
	ns := env.Namespace(t)
	r := executor(t, onCluster(ns, writeStep(t, "framework: torch\ntrainer: {func: \"def f(): pass\", numNodes: -1}"))...)
	assert.Equal(t, cli.ExitInvalid, r.code)
	assert.Contains(t, r.stderr, "trainer.numNodes: Invalid value: -1: must be 1 or more")
	assert.Empty(t, testenv.TrainJobs(t.Context(), t, env.Client, ns))
}

func TestDryRunPrintsTheTrainJobAndCreatesNothing(t *testing.T) {
	ns := env.Namespace(t)
	cmd, stdout, stderr := command(t, onCluster(ns, writeStep(t, xgbStep), "--dry-run")...)
	require.NoError(t, cmd.Run(), stderr.String())
	out := stdout.String()
	assert.Contains(t, out, "kind: TrainJob")
	assert.Contains(t, out, "name: xgboost-distributed")
	assert.Contains(t, out, "numNodes: 2")
	assert.Empty(t, testenv.TrainJobs(t.Context(), t, env.Client, ns))
}

func TestReplayFindsTheSameTrainJob(t *testing.T) {
	ns := env.Namespace(t)
	f := writeStep(t, xgbStep)
	args := onCluster(ns, f, "--step-key", "train", "--owner-uid", "wf-1234")
	first := executor(t, args...)
	require.Equal(t, cli.ExitSucceeded, first.code, first.stderr)
	second := executor(t, args...)
	require.Equal(t, cli.ExitSucceeded, second.code, second.stderr)
	assert.Contains(t, second.stderr, "found existing TrainJob")
	assert.Equal(t, first.outputs["trainjob-name"], second.outputs["trainjob-name"])
	assert.Len(t, testenv.TrainJobs(t.Context(), t, env.Client, ns), 1)
	third := executor(t, append(args, "--attempt", "1")...)
	require.Equal(t, cli.ExitSucceeded, third.code, third.stderr)
	assert.Len(t, testenv.TrainJobs(t.Context(), t, env.Client, ns), 2, "a new attempt is a new TrainJob")
}

func TestCancelDeletesTheTrainJob(t *testing.T) {
	ns := env.Namespace(t)
	cmd, _, stderr := command(t, onCluster(ns, writeStep(t, "framework: jax\nlabels: {sim-mode: hold}\ntrainer: {func: \"def f(): pass\"}"))...)
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "Running:") }, testenv.Timeout, testenv.Interval)
	require.Len(t, testenv.TrainJobs(t.Context(), t, env.Client, ns), 1)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	err := cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, cli.ExitInterrupts, ee.ExitCode(), stderr.String())
	assert.Contains(t, stderr.String(), "deleted TrainJob")
	assert.Empty(t, testenv.TrainJobs(t.Context(), t, env.Client, ns))
}

func TestRuntimesListsTheClusterRuntimes(t *testing.T) {
	cmd, stdout, stderr := command(t, "runtimes", "--kubeconfig", env.Kubeconfig)
	require.NoError(t, cmd.Run(), stderr.String())
	assert.Regexp(t, `torch-distributed\s+ClusterTrainingRuntime\s+torch\s+CustomTrainer\s+torch\s+1`, stdout.String())
	assert.Regexp(t, `torchtune-llama3.2-1b\s+ClusterTrainingRuntime\s+torchtune\s+BuiltinTrainer`, stdout.String())
}

// Local backend: no cluster at all (an empty kubeconfig path and no in-cluster env).
func local(t *testing.T, y string, extra ...string) result {
	t.Helper()
	return executor(t, append([]string{"run", "--local", "--runtimes-from", "stock", "-f", writeStep(t, y)}, extra...)...)
}

func TestLocalRunsTheExample(t *testing.T) {
	r := executor(t, "run", "--local", "--runtimes-from", "stock", "-f", "../../../examples/steps/hello-xgboost.yaml")
	require.Equal(t, cli.ExitSucceeded, r.code, r.stderr)
	assert.Contains(t, r.stdout, "[node-0] worker 0 done")
	assert.Contains(t, r.stdout, "[node-1] worker 1 done")
	assert.Contains(t, r.stdout, `quotes ' " and $HOME stay literal`)
	assert.Equal(t, "Succeeded", r.outputs["phase"])
	assert.Equal(t, "xgboost-distributed", r.outputs["runtime"])
	// rank 0's return value, captured locally as the termination message is on a cluster.
	assert.Equal(t, "0", r.outputs["result-worker"])
	assert.NotEmpty(t, r.outputs["result-w"])
	assert.JSONEq(t, fmt.Sprintf(`{"w": %s, "b": %s, "worker": 0}`, r.outputs["result-w"], r.outputs["result-b"]), r.outputs["result"])
}

func TestLocalFailureCarriesTheTraceback(t *testing.T) {
	r := local(t, "framework: jax\ntrainer: {numNodes: 2, func: \"def f():\\n    import os\\n    if os.environ['JAX_PROCESS_ID'] == '1':\\n        raise SystemExit('rank 1 gave up')\\n\"}")
	assert.Equal(t, cli.ExitFailed, r.code, r.stderr)
	assert.Equal(t, "Failed", r.outputs["phase"])
	assert.Contains(t, r.outputs["message"], "last lines of node-1")
	assert.Contains(t, r.outputs["message"], "rank 1 gave up")
}

func TestLocalTimeout(t *testing.T) {
	r := local(t, "framework: jax\ntimeout: 1s\ntrainer: {func: \"def f():\\n    import time\\n    time.sleep(60)\\n\"}")
	assert.Equal(t, cli.ExitTimedOut, r.code, r.stderr)
	assert.Equal(t, "TimedOut", r.outputs["phase"])
}

func TestLocalSaysWhenTorchrunIsMissing(t *testing.T) {
	// A PATH with bash and python but no torchrun.
	dir := t.TempDir()
	py, err := exec.LookPath("python3")
	require.NoError(t, err)
	require.NoError(t, os.Symlink(py, filepath.Join(dir, "python")))
	cmd, _, stderr := command(t, "run", "--local", "--runtimes-from", "stock", "-f", writeStep(t, "framework: torch\ntrainer: {func: \"def f(): pass\"}"))
	cmd.Env = append(os.Environ(), "PATH="+dir+":/usr/bin:/bin")
	err = cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, cli.ExitNoEntry, ee.ExitCode())
	assert.Contains(t, stderr.String(), "torchrun is not installed on this machine")
	assert.Contains(t, stderr.String(), "pip install torch")
}

func TestLocalDryRun(t *testing.T) {
	start := time.Now()
	cmd, stdout, stderr := command(t, "run", "--local", "--runtimes-from", "stock", "--dry-run", "-f", "../../../examples/steps/hello-xgboost.yaml")
	require.NoError(t, cmd.Run(), stderr.String())
	assert.Contains(t, stdout.String(), "kind: TrainJob")
	assert.NotContains(t, stdout.String(), "[node-0]", "a dry run runs nothing")
	_ = start
}

// A standard resource name in any case is written as Kubernetes spells it in the TrainJob the
// binary prints (a hugepages size as given), as the Kubeflow SDK writes it; else JobSet's Job
// would be refused long after the step started.
func TestDryRunSpellsResourceNamesAsKubernetesDoes(t *testing.T) {
	for _, tc := range []struct {
		given string
		want  []corev1.ResourceName
	}{
		{"{EPHEMERAL-STORAGE: 1Gi, Memory: 1Gi, CPU: 1}", []corev1.ResourceName{"ephemeral-storage", "memory", "cpu"}},
		{"{HugePages-2Mi: 4Mi, memory: 1Gi}", []corev1.ResourceName{"hugepages-2Mi", "memory"}},
		{"{NVIDIA.com/GPU: 1, example.com/Dev: 2}", []corev1.ResourceName{"nvidia.com/gpu", "example.com/Dev"}},
	} {
		t.Run(tc.given, func(t *testing.T) {
			step := "framework: xgboost\ntrainer:\n  func: \"def f(): pass\"\n  resourcesPerNode: " + tc.given + "\n"
			cmd, stdout, stderr := command(t, "run", "--local", "--runtimes-from", "stock", "--dry-run", "-f", writeStep(t, step))
			require.NoError(t, cmd.Run(), stderr.String())
			var tj trainer.TrainJob
			require.NoError(t, yaml.Unmarshal(stdout.Bytes(), &tj), stdout.String())
			require.NotNil(t, tj.Spec.Trainer)
			res := tj.Spec.Trainer.ResourcesPerNode
			require.NotNil(t, res, "the printed TrainJob has resourcesPerNode")
			assert.ElementsMatch(t, tc.want, slices.Collect(maps.Keys(res.Limits)))
			assert.ElementsMatch(t, tc.want, slices.Collect(maps.Keys(res.Requests)))
		})
	}
}

// A resource name Kubernetes would refuse is refused by the binary before anything runs, naming
// the field and what would do.
func TestDryRunRefusesAResourceNameKubernetesRefuses(t *testing.T) {
	for _, tc := range []struct{ name, wantErr string }{
		{"my gpu", `trainer.resourcesPerNode[my gpu]: Invalid value: "my gpu": must be cpu, memory, ephemeral-storage, hugepages-<size>, gpu, storage, mig-<profile> or a resource name such as example.com/device`},
		{"foo", `trainer.resourcesPerNode[foo]: Invalid value: "foo": a name without a domain must be cpu, memory, ephemeral-storage, hugepages-<size> or an alias (gpu, storage, mig-<profile>); any other resource needs its domain, such as example.com/foo`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := local(t, "framework: xgboost\ntrainer:\n  func: \"def f(): pass\"\n  resourcesPerNode: {\""+tc.name+"\": 1}\n", "--dry-run")
			assert.Equal(t, cli.ExitInvalid, r.code, r.stderr)
			assert.Contains(t, r.stderr, tc.wantErr)
			assert.False(t, strings.Contains(r.stdout, "kind: TrainJob"), "no TrainJob is printed for a step that would be refused")
		})
	}
}
