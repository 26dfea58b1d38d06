package image_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/internal/manifest"
	"github.com/trainstep/trainstep/internal/release"
)

// readmeInstall is the README's Install section's shell block: its commands, comments cut.
func readmeInstall(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(b), "\n## Install\n")
	require.True(t, ok, "README.md has no ## Install section")
	_, block, ok := strings.Cut(section, "```sh\n")
	require.True(t, ok, "README.md's Install section has no ```sh block")
	block, _, ok = strings.Cut(block, "```")
	require.True(t, ok)
	var cmds []string
	for line := range strings.Lines(block) {
		cmd, _, _ := strings.Cut(line, "#")
		if cmd = strings.TrimSpace(cmd); cmd != "" {
			cmds = append(cmds, cmd)
		}
	}
	return cmds
}

var makeTarget = regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`)

// TestReadmeInstallRunsAStep follows the README's Install section as written, command by command:
// `kubectl apply -k manifests/<face>` is kustomize's build of that directory (krusty, the code
// kubectl runs) applied server-side, as kubectl applies; `make image` builds the image the
// manifests name (trainstep:dev; this suite's TestMain builds the same image from the same
// tree), and `make release` the release TestReleaseArgoInstall… and TestReleaseTektonInstall…
// install. Each face installed so then runs a step from that image, as its manifests' own
// ServiceAccounts. A command the test does not know how to follow fails it.
func TestReadmeInstallRunsAStep(t *testing.T) {
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	require.NoError(t, err)
	var targets []string
	for _, m := range makeTarget.FindAllStringSubmatch(string(makefile), -1) {
		targets = append(targets, m[1])
	}
	var faces []string
	for _, cmd := range readmeInstall(t) {
		f := strings.Fields(cmd)
		switch {
		case len(f) == 4 && f[0] == "kubectl" && f[1] == "apply" && f[2] == "-k" && strings.HasPrefix(f[3], "manifests/"):
			faces = append(faces, strings.TrimPrefix(f[3], "manifests/"))
		case len(f) >= 2 && f[0] == "make":
			assert.Contains(t, targets, f[1], "the README runs `%s`, and the Makefile has no target %s", cmd, f[1])
			for _, v := range f[2:] {
				name, _, ok := strings.Cut(v, "=")
				require.True(t, ok, "`%s`: %q is not a make variable", cmd, v)
				assert.Contains(t, string(makefile), "$("+name+")", "`%s` sets %s, which the Makefile never reads", cmd, name)
			}
		default:
			t.Errorf("the README's install runs `%s`, which this test does not know how to follow", cmd)
		}
	}
	slices.Sort(faces)
	require.Equal(t, release.Faces, faces, "the README installs each face with kubectl apply -k")

	t.Run("tekton", func(t *testing.T) {
		applyKustomization(t, "tekton")
		tektonRunsAStep(t, "trainstep-system", "trainstep-tekton-controller", release.DevImage)
	})
	t.Run("argo", func(t *testing.T) {
		const ns = "ml" // manifests/argo's workflow namespace, which its user makes first
		ensureNamespace(t, ns)
		applyKustomization(t, "argo")
		argoRunsAStep(t, ns, ns, "trainstep-argo-janitor", release.DevImage)
	})
}

// applyKustomization does `kubectl apply -k manifests/<face>`: kustomize's build, applied
// server-side.
func applyKustomization(t *testing.T, face string) {
	t.Helper()
	stream, err := release.Kustomize(root, face)
	require.NoError(t, err)
	objs := decode(t, stream)
	require.NotEmpty(t, objs)
	_, err = manifest.Apply(t.Context(), c, objs, "")
	require.NoError(t, err)
}
