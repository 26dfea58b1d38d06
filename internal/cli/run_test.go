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

// The stock runtimes are all a stock Trainer v2.3.0 install has: a step can name any of them
// off the cluster, and framework torchtune alone is as ambiguous as on a cluster, which has three.
func TestDryRunOnTheStockRuntimesFindsWhatAClusterHas(t *testing.T) {
	const tune = "framework: torchtune\ntrainer: {epochs: 1}\n"
	cases := map[string]struct {
		step     string
		code     int
		inStdout string
		inStderr []string
	}{
		"a torchtune runtime named": {step: "runtime: {name: torchtune-qwen2.5-1.5b}\n" + tune, code: ExitSucceeded,
			inStdout: "name: torchtune-qwen2.5-1.5b"},
		"torchtune, no runtime named": {step: tune, code: ExitInvalid,
			inStderr: []string{`3 runtimes have framework "torchtune"`, "torchtune-llama3.2-1b", "torchtune-llama3.2-3b", "torchtune-qwen2.5-1.5b", "runtime.name"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			noCluster(t)
			f := filepath.Join(t.TempDir(), "step.yaml")
			require.NoError(t, os.WriteFile(f, []byte(tc.step), 0o644))
			var stdout, stderr bytes.Buffer
			code := MainWith(t.Context(), []string{"run", "-f", f, "--dry-run", "--runtimes-from", "stock"}, strings.NewReader(""), &stdout, &stderr, Overrides{})
			require.Equal(t, tc.code, code, "stderr: %s", stderr.String())
			assert.Contains(t, stdout.String(), tc.inStdout)
			for _, s := range tc.inStderr {
				assert.Contains(t, stderr.String(), s)
			}
		})
	}
}
