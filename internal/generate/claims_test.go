package generate

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testClaims are the claims the block and scanner tests state things against.
func testClaims() Claims {
	return Claims{
		Release:    "v0.3.0",
		Argo:       System{Proved: []string{"v3.6.12", "v3.7.3", "v4.0.7"}},
		Tekton:     System{Proved: []string{"v0.68.0", "v1.3.0"}},
		Kubernetes: System{Proved: []string{"1.33.13", "1.36.3"}},
		Trainer:    System{Proved: []string{"v2.0.1", "v2.2.1", "v2.3.0"}},
		Kueue:      "v0.17.0",
		Crane:      "v0.22.1",
	}
}

// The minimum of a system is the oldest release that passed, whatever order the matrix lists its
// rows in; a failed row is not claimed.
func TestLoadClaimsTakesTheOldestPassingReleaseAsTheMinimum(t *testing.T) {
	dir := t.TempDir()
	write := func(path, content string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, path)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, path), []byte(content), 0o644))
	}
	write("VERSION", "v0.4.0\n")
	write(kueueMake, "KUEUE_VERSION ?= v0.18.1\n")
	write("go.mod", "require (\n\tgithub.com/google/go-containerregistry v0.22.1\n)\n")
	write(compatFile, `[
		{"id": "argo@v3.7.3", "system": "argo", "version": "v3.7.3", "status": "pass"},
		{"id": "argo@v3.6.12", "system": "argo", "version": "v3.6.12", "status": "fail"},
		{"id": "argo@v3.10.0", "system": "argo", "version": "v3.10.0", "status": "pass"},
		{"id": "tekton@v1.3.0", "system": "tekton", "version": "v1.3.0", "status": "pass"},
		{"id": "k8s@1.36.3", "system": "k8s", "version": "1.36.3", "status": "pass"},
		{"id": "k8s@1.33.13", "system": "k8s", "version": "1.33.13", "status": "pass"},
		{"id": "trainer@v2.3.0", "system": "trainer", "version": "v2.3.0", "status": "pass"}
	]`)
	c, err := LoadClaims(dir)
	require.NoError(t, err)
	assert.Equal(t, "v0.4.0", c.Release)
	assert.Equal(t, "0.4.0", c.ChartVersion())
	assert.Equal(t, []string{"v3.7.3", "v3.10.0"}, c.Argo.Proved)
	assert.Equal(t, "v3.7.3", c.Argo.Min())
	assert.Equal(t, "1.33", c.Kubernetes.MinMinor())
	assert.Equal(t, "v0.18.1", c.Kueue)
	assert.Equal(t, "v0.22.1", c.Crane)

	write(compatFile, `[{"id": "argo@v3.7.3", "system": "argo", "version": "v3.7.3", "status": "fail"}]`)
	_, err = LoadClaims(dir)
	assert.ErrorContains(t, err, "proves no release of argo")

	write("VERSION", "0.4\n")
	_, err = LoadClaims(dir)
	assert.ErrorContains(t, err, "write the release being prepared as vMAJOR.MINOR.PATCH")
}
