package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// noCluster leaves the process with no way to find a cluster: no kubeconfig, no in-cluster env.
func noCluster(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("KUBECONFIG", filepath.Join(dir, "missing-kubeconfig"))
	t.Setenv("HOME", dir)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
}

func TestDryRunWithoutAClusterUsesStockRuntimes(t *testing.T) {
	noCluster(t)
	step := filepath.Join("..", "..", "examples", "steps", "hello-xgboost.yaml")
	var stdout, stderr bytes.Buffer
	code := MainWith(t.Context(), []string{"run", "-f", step, "--dry-run"}, strings.NewReader(""), &stdout, &stderr, Overrides{})
	require.Equal(t, ExitSucceeded, code, "stderr: %s", stderr.String())
	assert.Contains(t, stdout.String(), "kind: TrainJob")
	assert.Contains(t, stdout.String(), "name: xgboost-distributed")
	assert.Contains(t, stderr.String(), "no cluster reachable; using the stock Kubeflow Trainer runtimes")
}

func TestDryRunWithRuntimesFromClusterStillNeedsOne(t *testing.T) {
	noCluster(t)
	f := filepath.Join(t.TempDir(), "step.yaml")
	require.NoError(t, os.WriteFile(f, []byte("framework: xgboost\ntrainer: {func: \"def f(): pass\"}\n"), 0o644))
	var stdout, stderr bytes.Buffer
	code := MainWith(t.Context(), []string{"run", "-f", f, "--dry-run", "--runtimes-from", "cluster"}, strings.NewReader(""), &stdout, &stderr, Overrides{})
	assert.Equal(t, ExitError, code, "stderr: %s", stderr.String())
	assert.Contains(t, stderr.String(), "--runtimes-from=cluster")
}

// The step's namePrefix names the TrainJob the CLI makes, before the identity's hash.
func TestDryRunNamesTheTrainJobWithTheStepsNamePrefix(t *testing.T) {
	noCluster(t)
	f := filepath.Join(t.TempDir(), "step.yaml")
	require.NoError(t, os.WriteFile(f, []byte("namePrefix: nightly-xgb\nframework: xgboost\ntrainer: {func: \"def f(): pass\"}\n"), 0o644))
	var stdout, stderr bytes.Buffer
	code := MainWith(t.Context(), []string{"run", "-f", f, "--dry-run", "--step-key", "train", "--owner-uid", "u"}, strings.NewReader(""), &stdout, &stderr, Overrides{})
	require.Equal(t, ExitSucceeded, code, "stderr: %s", stderr.String())
	assert.Regexp(t, `(?m)^  name: nightly-xgb-[0-9a-f]{12}$`, stdout.String())
}
