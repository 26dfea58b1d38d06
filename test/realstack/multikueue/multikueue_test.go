package multikueue_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/test/internal/realstack"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

const (
	timeout  = 3 * time.Minute
	interval = 200 * time.Millisecond
)

type result struct {
	code           int
	stdout, stderr string
	outputs        map[string]string
}

// executor runs the real binary against the manager, as a pipeline step on the manager would.
func executor(t *testing.T, ns, step string) result {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "step.yaml")
	require.NoError(t, os.WriteFile(file, []byte(step), 0o644))
	outDir := filepath.Join(dir, "outputs")
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--namespace", ns, "-f", file, "--output-dir", outDir)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+manager.Kubeconfig)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
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

// A step on the manager is dispatched to the worker and completes there. On the manager the
// step reports Running from the status MultiKueue mirrors (there are no pods on the manager),
// names the worker cluster, and its startTimeout (shorter than the job's run) never deletes the
// running remote job; the outputs say what stays on the worker's pods.
func TestMultiKueueStepRunsOnTheWorkerAndCompletes(t *testing.T) {
	ns := manager.Namespace(t)
	q := manager.MultiKueueQueue(t, worker, ns, realstack.NodeGPUs)
	r := executor(t, ns, fmt.Sprintf(`
framework: torch
queueName: %s
trainer:
  numNodes: 1
  resourcesPerNode: {gpu: 1}
  env: {KWOK_RUN_SECONDS: "30"}
  func: |
    def train():
        return {"loss": 0.1}
timeout: 3m
startTimeout: 20s
`, q))
	t.Logf("stderr:\n%s", r.stderr)
	require.Equal(t, cli.ExitSucceeded, r.code)
	name := r.outputs[trainjob.OutName]
	assert.Equal(t, "Succeeded", r.outputs[trainjob.OutPhase])
	assert.Contains(t, r.stderr, "Running: TrainJob "+name+" is running on cluster "+realstack.MultiKueueWorker+" (MultiKueue)")
	assert.Equal(t, realstack.MultiKueueWorker, r.outputs[trainjob.OutCluster])
	assert.Contains(t, r.outputs[trainjob.OutMessage], "MultiKueue")
	assert.Equal(t, "", r.outputs[trainjob.OutResult])
	assert.Equal(t, "result, log", r.outputs[trainjob.OutUndelivered])

	// The manager's TrainJob was Kueue's (managedBy) and has no JobSet pods; the worker ran it.
	local := &trainer.TrainJob{}
	require.NoError(t, manager.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, local))
	assert.Equal(t, "kueue.x-k8s.io/multikueue", ptr.Deref(local.Spec.ManagedBy, ""))
	assert.True(t, meta.IsStatusConditionTrue(local.Status.Conditions, trainer.TrainJobComplete), "mirrored: %+v", local.Status.Conditions)
	remote := testenv.TrainJobs(t.Context(), t, worker.Client, ns)
	require.Len(t, remote, 1)
	assert.Equal(t, name, remote[0].Name)
	assert.True(t, meta.IsStatusConditionTrue(remote[0].Status.Conditions, trainer.TrainJobComplete), "%+v", remote[0].Status.Conditions)
}
