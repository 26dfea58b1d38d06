package docs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A target that says what it is for: `name: prerequisites ## what`.
var documentedTarget = regexp.MustCompile(`(?m)^([a-zA-Z0-9_.-]+):[^#=\n]*## (.+)$`)

func runMake(t *testing.T, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on PATH")
	}
	cmd := exec.Command("make", append([]string{"--no-print-directory", "-s"}, args...)...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return string(out)
}

// `make help` lists every target with a `## ` comment, in the Makefile and in hack/make/*.mk.
func TestMakeHelpListsEveryDocumentedTarget(t *testing.T) {
	help := runMake(t, "help")
	makefiles, err := filepath.Glob(filepath.Join(root, "hack", "make", "*.mk"))
	require.NoError(t, err)
	makefiles = append(makefiles, filepath.Join(root, "Makefile"))
	n := 0
	for _, mf := range makefiles {
		b, err := os.ReadFile(mf)
		require.NoError(t, err)
		for _, m := range documentedTarget.FindAllStringSubmatch(string(b), -1) {
			n++
			assert.Regexp(t, `(?m)^  `+regexp.QuoteMeta(m[1])+` +`+regexp.QuoteMeta(strings.TrimSpace(m[2]))+`$`, help, "%s: target %s", mf, m[1])
		}
	}
	assert.Greater(t, n, 10, "the pattern finds the Makefile's documented targets")
}

// Plain `make` builds the binary, whatever hack/make/*.mk defines first.
func TestMakeDefaultBuildsTheBinary(t *testing.T) {
	dry := runMake(t, "-n")
	assert.Contains(t, dry, "go build")
	assert.Contains(t, dry, "./cmd/executor")
}
