package manifest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDocuments(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		kinds      []string
		err        string
	}{
		{name: "several, empty ones skipped", file: "---\nkind: A\n---\n---\n# only a comment\n---\nkind: B\nx: 1\n", kinds: []string{"A", "B"}},
		{name: "none", file: "", kinds: nil},
		{name: "a broken document is named by its place", file: "kind: A\n---\nkind: [\n", err: "document 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "f.yaml")
			require.NoError(t, os.WriteFile(f, []byte(tc.file), 0o644))
			docs, err := Documents(f)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			var kinds []string
			for _, d := range docs {
				kinds = append(kinds, d.Kind)
			}
			assert.Equal(t, tc.kinds, kinds)
		})
	}
}
