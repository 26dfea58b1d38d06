package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/internal/cli"
)

// asExecutor makes the test binary the executor when a test runs it again: the real main, its
// real stderr (where klog writes, whatever the command's own writer is), and its real exit code,
// without building another binary.
const asExecutor = "TRAINSTEP_TEST_AS_EXECUTOR"

func TestMain(m *testing.M) {
	if os.Getenv(asExecutor) == "1" {
		main()
	}
	os.Exit(m.Run())
}

// executor runs the binary as a user would, with env on top of nothing but PATH: no KUBECONFIG,
// no KUBERNETES_SERVICE_HOST, a HOME of its own.
func executor(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append([]string{asExecutor + "=1", "PATH=" + os.Getenv("PATH")}, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		require.NoError(t, err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

func TestRunWithoutAnyClusterSaysSoPlainly(t *testing.T) {
	home := t.TempDir()
	step := filepath.Join("..", "..", "examples", "steps", "hello-xgboost.yaml")
	missing := filepath.Join(home, "missing")

	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"KUBECONFIG unset, no ~/.kube/config", []string{"HOME=" + home},
			"no kubeconfig found ($KUBECONFIG is unset and " + filepath.Join(home, ".kube", "config") + " does not exist)"},
		// client-go logs "Config not found" through klog when every $KUBECONFIG file is missing.
		{"KUBECONFIG names a missing file", []string{"HOME=" + home, "KUBECONFIG=" + missing},
			"no kubeconfig found ($KUBECONFIG names no file that exists: " + missing + ")"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := executor(t, tc.env, "run", "-f", step)

			assert.Equal(t, cli.ExitError, code, "stderr: %s", stderr)
			assert.Empty(t, stdout)
			assert.Contains(t, stderr, tc.want)
			assert.Contains(t, stderr, "set KUBECONFIG or pass --kubeconfig, or use --local")
			assert.NotContains(t, stderr, "KUBERNETES_MASTER")
			// One line, ours: no klog line (I0101 …, W0101 …, "Config not found") around it.
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			assert.Len(t, lines, 1, "stderr: %s", stderr)
			assert.True(t, strings.HasPrefix(lines[0], "trainstep: error: no cluster to connect to: "), "stderr: %s", stderr)
		})
	}
}
