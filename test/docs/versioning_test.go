package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A label or annotation: `LabelX = "…"` or `AnnotationX = "…"`.
var labelConst = regexp.MustCompile(`(?m)^\s*(?:const\s+)?(?:Label|Annotation)\w*\s*=\s*"([^"]+)"`)

// docs/versioning.md lists every label and annotation trainstep writes, so a new one is a
// decision about what it promises, not an accident.
func TestVersioningListsEveryLabelTrainstepWrites(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "docs", "versioning.md"))
	require.NoError(t, err)
	doc := string(b)
	n := 0
	// The files that hold what trainstep writes on a TrainJob; the rest of core/trainjob names
	// labels it only reads (JobSet's, Kueue's, the Job controller's).
	for _, src := range []string{"labels.go", "keep.go"} {
		b, err := os.ReadFile(filepath.Join(root, "core", "trainjob", src))
		require.NoError(t, err)
		for _, m := range labelConst.FindAllStringSubmatch(string(b), -1) {
			n++
			assert.Truef(t, strings.Contains(doc, "`"+m[1]), "core/trainjob/%s writes %s: say in docs/versioning.md what it promises", src, m[1])
		}
	}
	assert.GreaterOrEqual(t, n, 12, "the pattern finds core/trainjob's labels and annotations")
}
