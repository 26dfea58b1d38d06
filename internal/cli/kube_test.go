package cli

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
)

func TestNoClusterSaysWhereItLookedAndWhatToDo(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	missing := filepath.Join(dir, "missing")
	home := filepath.Join(dir, "home", ".kube", "config")
	step := filepath.Join("..", "..", "examples", "steps", "hello-xgboost.yaml")

	for _, tc := range []struct {
		name       string
		kubeconfig string   // $KUBECONFIG; "" unsets it
		args       []string // after run -f STEP
		inCluster  bool     // $KUBERNETES_SERVICE_HOST/PORT set, but no token mounted
		homeEmpty  bool     // ~/.kube/config exists, empty
		want       []string
	}{
		{
			name: "no kubeconfig anywhere",
			want: []string{"no cluster to connect to: no kubeconfig found ($KUBECONFIG is unset and " + home + " does not exist)",
				"this is not a pod in a cluster", "set KUBECONFIG or pass --kubeconfig, or use --local to train on this machine"},
		},
		{
			name:      "an empty ~/.kube/config",
			homeEmpty: true,
			want:      []string{"no cluster to connect to: the kubeconfig " + home + " names no cluster", "--local"},
		},
		{
			name:       "KUBECONFIG names a missing file",
			kubeconfig: missing,
			want:       []string{"no kubeconfig found ($KUBECONFIG names no file that exists: " + missing + ")", "--local"},
		},
		{
			name:       "KUBECONFIG names an empty file",
			kubeconfig: missing + string(filepath.ListSeparator) + empty,
			want:       []string{"the kubeconfig " + empty + " names no cluster", "--local"},
		},
		{
			name: "--kubeconfig names an empty file",
			args: []string{"--kubeconfig", empty},
			want: []string{"the kubeconfig " + empty + " (--kubeconfig) names no cluster"},
		},
		{
			name:      "a pod without its ServiceAccount token",
			inCluster: true,
			want:      []string{"this pod has no ServiceAccount token at " + filepath.Join(dir, "token")},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.kubeconfig)
			if tc.kubeconfig == "" {
				require.NoError(t, os.Unsetenv("KUBECONFIG"))
			}
			host, port := "", ""
			if tc.inCluster {
				host, port = "10.0.0.1", "443"
			}
			t.Setenv("KUBERNETES_SERVICE_HOST", host)
			t.Setenv("KUBERNETES_SERVICE_PORT", port)
			// client-go's ~/.kube/config, read at start-up: the test's own, never the developer's.
			swap(t, &clientcmd.RecommendedHomeFile, home)
			swap(t, &serviceAccountToken, filepath.Join(dir, "token"))
			if tc.homeEmpty {
				require.NoError(t, os.MkdirAll(filepath.Dir(home), 0o700))
				require.NoError(t, os.WriteFile(home, nil, 0o600))
				t.Cleanup(func() { _ = os.Remove(home) })
			}

			var stdout, stderr bytes.Buffer
			args := append([]string{"run", "-f", step}, tc.args...)
			code := MainWith(t.Context(), args, strings.NewReader(""), &stdout, &stderr, Overrides{})

			assert.Equal(t, ExitError, code)
			for _, w := range tc.want {
				assert.Contains(t, stderr.String(), w)
			}
			assert.NotContains(t, stderr.String(), "KUBERNETES_MASTER", "client-go's words leak")
			assert.Empty(t, stdout.String())
		})
	}
}

// The error keeps client-go's for a caller that asks, without saying it.
func TestNoClusterErrorUnwrapsToClientGos(t *testing.T) {
	noCluster(t)
	_, err := (&kubeFlags{}).restConfig()
	require.Error(t, err)
	assert.True(t, clientcmd.IsEmptyConfig(errors.Unwrap(err)))
	assert.NotContains(t, err.Error(), "KUBERNETES_MASTER")
	assert.NotContains(t, err.Error(), "or use", "a command with no way round a cluster offers none")
}

func swap[T any](t *testing.T, p *T, v T) {
	t.Helper()
	old := *p
	*p = v
	t.Cleanup(func() { *p = old })
}
