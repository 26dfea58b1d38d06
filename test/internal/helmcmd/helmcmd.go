// Package helmcmd runs the real helm that hack/build-helm.sh builds into HELM_ASSETS, for the
// suites that install trainstep's chart as a user would.
package helmcmd

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Binary is the helm binary in HELM_ASSETS; a missing one fails the test with how to build it.
func Binary(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("HELM_ASSETS")
	require.NotEmpty(t, dir, "HELM_ASSETS is not set: run `make test-assets` (it builds helm into the cache) and set HELM_ASSETS to its directory (`make test` does both)")
	bin := filepath.Join(dir, "helm")
	_, err := os.Stat(bin)
	require.NoError(t, err, "helm is missing from HELM_ASSETS=%s: run `make test-assets`", dir)
	return bin
}

// Run runs helm with empty caches and config of its own (nothing of the machine's helm setup
// leaks in) and returns its output; the error carries what helm wrote to stderr.
func Run(t testing.TB, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), Binary(t), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out), nil
}
