package generate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/internal/compat"
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
	// The generators' inputs: manifests/ (plugin.yaml beside the other manifests), the
	// compatibility results the README's table and the version claims are made from, the
	// release (VERSION) and Kueue's pin, and go.mod and go.sum, which say which Trainer module
	// the stock runtimes come from.
	inputs, err := filepath.Glob(filepath.Join(root, "manifests", "*", "*.yaml"))
	require.NoError(t, err)
	inputs = append(inputs, filepath.Join(root, "docs", "compatibility.json"), filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum"),
		filepath.Join(root, versionFile), filepath.Join(root, kueueMake))
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

	const edited = "schemas/step.schema.json"
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

// The README promises a release only when its last run passed every case; a failed or unrunnable
// row is named with why, and a system with no run says so.
func TestCompatBlockPromisesOnlyWhatPassed(t *testing.T) {
	rows := []compat.Row{
		{ID: "trainer@v2.0.1", System: "trainer", Version: "v2.0.1", Status: "pass", Faces: []compat.Face{{Cases: []compat.Case{
			{Name: "TestPod", Status: "pass", Notes: []string{"no pod mechanism: refused by name"}}}}}},
		{ID: "trainer@v2.3.0", System: "trainer", Version: "v2.3.0", Status: "pass"},
		{ID: "argo@v3.6.12", System: "argo", Version: "v3.6.12", Status: "fail", Faces: []compat.Face{{Cases: []compat.Case{
			{Name: "TestA", Status: "fail"}, {Name: "TestB", Status: "pass"}}}}},
		{ID: "argo@v4.0.7", System: "argo", Version: "v4.0.7", Status: "error", Reason: "its assets could not be built"},
		{ID: "tekton@v1.3.0", System: "tekton", Version: "v1.3.0", Status: "pass"},
	}
	block := compatBlock(rows)
	for _, want := range []string{
		"| Kubeflow Trainer (+ the JobSet its go.mod requires) | v2.0.1 (1 note), v2.3.0 |  |",
		"| Argo Workflows (workflow-controller + argoexec agent) |  | v3.6.12 (1 cases failed, see docs/compatibility.md), v4.0.7 (could not run: its assets could not be built) |",
		"| Tekton Pipelines | v1.3.0 |  |",
		"| Kubernetes (kube-apiserver, kube-controller-manager) |  | no release run yet |",
	} {
		assert.Contains(t, block, want)
	}
}

// The page Argo's plugin directory shows first installs the whole plugin, with its image built
// and pushed before, not the ConfigMap alone (Argo's stock page), which leaves the agent pod
// without its ServiceAccount, token Secret and RBAC.
func TestArgoPluginReadmeGivesTheWholeInstall(t *testing.T) {
	b, err := argoPluginReadme(root)
	require.NoError(t, err)
	readme := string(b)
	assert.Contains(t, readme, "    kubectl apply -k manifests/argo\n")
	assert.NotContains(t, readme, "kubectl apply -f trainstep-executor-plugin-configmap.yaml")
	assert.Contains(t, readme, "extraEnv:\n           - name: ARGO_EXECUTOR_PLUGINS\n")
	image := strings.Index(readme, "make image")
	apply := strings.Index(readme, "kubectl apply")
	assert.True(t, image >= 0 && image < apply, "the image is built before anything is applied")
	c, err := LoadClaims(root)
	require.NoError(t, err)
	assert.Contains(t, readme, "Argo Workflows "+c.Argo.Min()+" or later")
}
