package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testImage = "registry.example.com/trainstep@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func untar(t *testing.T, tgz []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(tgz))
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		require.NoError(t, err)
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		files[h.Name] = string(b)
	}
}

func TestChartIsStampedWithTheRelease(t *testing.T) {
	root := filepath.Join("..", "..")
	at := time.Unix(1764547200, 0).UTC()
	name, tgz, err := Chart(root, "v0.3.0", testImage, at)
	require.NoError(t, err)
	assert.Equal(t, "trainstep-0.3.0.tgz", name)
	files := untar(t, tgz)
	require.Contains(t, files, "trainstep/Chart.yaml")
	require.Contains(t, files, "trainstep/templates/tekton.yaml")
	assert.Contains(t, files["trainstep/Chart.yaml"], "\nversion: 0.3.0\n")
	assert.Contains(t, files["trainstep/Chart.yaml"], "\nappVersion: v0.3.0\n")
	assert.Contains(t, files["trainstep/Chart.yaml"], "image: "+testImage+"\n", "Artifact Hub's image list")
	assert.Contains(t, files["trainstep/values.yaml"], "\n  repository: registry.example.com/trainstep\n")
	assert.Contains(t, files["trainstep/values.yaml"], "\n  digest: sha256:0123456789abcdef")

	_, again, err := Chart(root, "v0.3.0", testImage, at)
	require.NoError(t, err)
	assert.Equal(t, tgz, again, "one commit, one package")
}

func TestChartRefuses(t *testing.T) {
	_, _, err := Chart(filepath.Join("..", ".."), "v0.3.0", "registry.example.com/trainstep:v0.3.0", time.Now())
	require.ErrorContains(t, err, "pins the image by digest")

	_, err = replaceLine([]byte("a: 1\na: 2\n"), chartVersion, "version: 1")
	require.ErrorContains(t, err, "found 0")
	_, err = replaceLine([]byte("version: 1\nversion: 2\n"), chartVersion, "version: 3")
	require.ErrorContains(t, err, "found 2")
}
