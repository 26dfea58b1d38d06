package realstack_test

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/realstack"
)

// The suite runs on every Trainer release of the compatibility matrix (REALSTACK_ASSETS). What a
// release can do is read as trainstep reads it, from the installed CRD and runtimes; where a test
// meets a release without what it exercises, it proves what trainstep does instead and says so
// (realstack.Lacks), for the table.

// installedAPI is what trainstep reads of the installed Trainer from its CRD, as every face does.
func installedAPI(t *testing.T) trainjob.API {
	t.Helper()
	api, err := trainjob.DetectAPI(t.Context(), stack.Client)
	require.NoError(t, err)
	return api
}

// trainerRelease is the stack's Trainer release, for messages.
func trainerRelease(t *testing.T) string {
	t.Helper()
	v, _, err := realstack.Release(stack.Assets)
	require.NoError(t, err)
	return v
}

// pinnedRelease says whether the stack runs the Trainer release `make test` pins, the one the
// suites' expectations of the Trainer's own words are written for.
func pinnedRelease(t *testing.T) bool {
	pinned := strings.TrimPrefix(realstack.DefaultAssetsName, "trainer-")
	return strings.HasPrefix(pinned, trainerRelease(t)+"-")
}

// minorOf is the minor version of a v0.MINOR.PATCH release (JobSet's), or -1.
func minorOf(release string) int {
	parts := strings.Split(strings.TrimPrefix(release, "v"), ".")
	if len(parts) < 2 {
		return -1
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil {
		return -1
	}
	return n
}

// hasRuntime says whether the release ships the stock runtime name.
func hasRuntime(name string) bool { return slices.Contains(stack.Runtimes, name) }

// TestDiscoverySeesEveryStockRuntimeOfTheRelease: `executor runtimes` on the stack lists each
// ClusterTrainingRuntime the release ships, under the framework its label gives, and skips only
// an unlabelled one, saying why: what discovery makes of that release's runtimes, which differ
// per release (v2.0 ships an unlabelled MPI runtime, v2.2 adds JAX and XGBoost).
func TestDiscoverySeesEveryStockRuntimeOfTheRelease(t *testing.T) {
	t.Parallel()
	cmd := exec.CommandContext(t.Context(), bin, "runtimes")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+stack.Kubeconfig)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	listed := map[string][]string{}
	for _, line := range strings.Split(string(out), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 0 {
			listed[f[0]] = f
		}
	}
	require.NotEmpty(t, stack.Runtimes)
	for _, name := range stack.Runtimes {
		rt := &trainer.ClusterTrainingRuntime{}
		require.NoError(t, stack.Client.Get(t.Context(), client.ObjectKey{Name: name}, rt))
		f, ok := listed[name]
		if !assert.True(t, ok, "runtime %s of Trainer %s is not listed:\n%s", name, trainerRelease(t), out) {
			continue
		}
		if fw := rt.Labels[runtimes.FrameworkLabel]; fw != "" {
			assert.Equal(t, fw, f[2], "runtime %s's framework", name)
			assert.NotContains(t, strings.Join(f, " "), "skipped", "runtime %s", name)
			continue
		}
		// As the SDK does: a runtime with no framework label cannot be discovered by framework.
		realstack.Lacks(t, "Trainer %s ships runtime %s without the %s label: discovery lists it as skipped, with that reason", trainerRelease(t), name, runtimes.FrameworkLabel)
		assert.Contains(t, strings.Join(f, " "), "skipped: no "+runtimes.FrameworkLabel+" label", "runtime %s", name)
	}
	t.Logf("Trainer %s runtimes as discovery sees them:\n%s", trainerRelease(t), out)
}
