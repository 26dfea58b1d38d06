package generate

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const root = "../.."

// Every generated file in the repository is what its generator makes today.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	stale, err := Stale(root)
	require.NoError(t, err)
	assert.Empty(t, stale, "stale generated files: run `make generate` and commit the result")
}

// Stale notices a hand edit, and Write repairs it and says which file it rewrote.
func TestStaleFindsAndWriteRepairsAnEdit(t *testing.T) {
	dir := t.TempDir()
	// The generators' inputs: manifests/ (plugin.yaml, and every face the chart is made from).
	inputs, err := filepath.Glob(filepath.Join(root, "manifests", "*", "*.yaml"))
	require.NoError(t, err)
	files := Files()
	for _, in := range inputs {
		rel, err := filepath.Rel(root, in)
		require.NoError(t, err)
		files = append(files, File{Path: rel})
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f.Path))
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, f.Path)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, f.Path), b, 0o644))
	}
	stale, err := Stale(dir)
	require.NoError(t, err)
	require.Empty(t, stale)

	edited := Files()[0].Path
	require.NoError(t, os.WriteFile(filepath.Join(dir, edited), []byte("{}\n"), 0o644))
	stale, err = Stale(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{edited}, stale)

	changed, err := Write(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{edited}, changed)
	stale, err = Stale(dir)
	require.NoError(t, err)
	assert.Empty(t, stale)
}
