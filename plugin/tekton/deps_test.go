package tekton

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The controller speaks the CustomRun JSON through its own types: neither knative nor Tekton's
// packages are linked into the executor (only the tests use Tekton's types, to check ours), and
// the core knows no engine.
func TestNoKnativeInTheController(t *testing.T) {
	engine := regexp.MustCompile(`^(github\.com/tektoncd/|knative\.dev/)`)
	for _, pkgs := range [][]string{{"."}, {"../../core/..."}, {"../../cmd/executor"}} {
		out, err := exec.CommandContext(t.Context(), "go", append([]string{"list", "-deps"}, pkgs...)...).Output()
		require.NoError(t, err)
		for _, dep := range strings.Fields(string(out)) {
			assert.Falsef(t, engine.MatchString(dep), "%v depends on %s", pkgs, dep)
		}
	}
}
