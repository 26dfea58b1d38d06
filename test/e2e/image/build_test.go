package image_test

import (
	"archive/tar"
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two builds of one commit are one image, byte for byte: the index digest and every manifest,
// config and layer under it; `make image` (hack/image) builds the image `make release` did, and
// a second `make release` writes the same files (SHA256SUMS covers the install files and the
// tarballs).
func TestImageDigestIsReproducible(t *testing.T) {
	built := filepath.Join(dist, "image")
	again := filepath.Join(t.TempDir(), "image")
	require.NoError(t, buildImage(t.Context(), again))

	first, second := index(t, filepath.Join(dist, "image")), index(t, again)
	d1, err := first.Digest()
	require.NoError(t, err)
	d2, err := second.Digest()
	require.NoError(t, err)
	assert.Equal(t, d1, d2, "two builds of the same commit have different digests")
	for _, p := range platforms {
		l1, l2 := layerDigests(t, platformImage(t, first, p)), layerDigests(t, platformImage(t, second, p))
		assert.Equal(t, l1, l2, "%s layers", p)
	}
	b1, err := os.ReadFile(filepath.Join(built, "digest"))
	require.NoError(t, err)
	assert.Equal(t, d1.String()+"\n", string(b1), "dist's digest file")

	dist2 := filepath.Join(t.TempDir(), "dist")
	require.NoError(t, buildRelease(t.Context(), dist2))
	sums1, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	require.NoError(t, err)
	sums2, err := os.ReadFile(filepath.Join(dist2, "SHA256SUMS"))
	require.NoError(t, err)
	assert.Equal(t, string(sums1), string(sums2), "two releases of one commit differ")
}

func layerDigests(t *testing.T, img v1.Image) []string {
	t.Helper()
	ls, err := img.Layers()
	require.NoError(t, err)
	var ds []string
	for _, l := range ls {
		d, err := l.Digest()
		require.NoError(t, err)
		ds = append(ds, d.String())
	}
	return ds
}

// The index has an image for each platform and no other, and each is what it says: its binary is
// built for it, and the config carries the entrypoint, the user and the labels.
func TestImageHasEachPlatformAndTheLabels(t *testing.T) {
	idx := index(t, filepath.Join(dist, "image"))
	im, err := idx.IndexManifest()
	require.NoError(t, err)
	var have []string
	for _, m := range im.Manifests {
		have = append(have, m.Platform.OS+"/"+m.Platform.Architecture)
	}
	assert.ElementsMatch(t, platforms, have, "the index's platforms")
	for _, p := range platforms {
		t.Run(p, func(t *testing.T) {
			img := platformImage(t, idx, p)
			cfg, err := img.ConfigFile()
			require.NoError(t, err)
			assert.Equal(t, p, cfg.OS+"/"+cfg.Architecture)
			assert.Equal(t, stampCreated, cfg.Created.UTC())
			for k, want := range map[string]string{
				"org.opencontainers.image.version":  stampVersion,
				"org.opencontainers.image.revision": stampCommit,
				"org.opencontainers.image.source":   "https://github.com/trainstep/trainstep",
				"dev.trainstep.api.trainer":         "github.com/kubeflow/trainer/v2@" + goModVersion(t, "github.com/kubeflow/trainer/v2"),
				"dev.trainstep.api.argo":            "github.com/argoproj/argo-workflows/v3@" + goModVersion(t, "github.com/argoproj/argo-workflows/v3"),
				"dev.trainstep.api.tekton":          "github.com/tektoncd/pipeline@" + goModVersion(t, "github.com/tektoncd/pipeline"),
			} {
				assert.Equal(t, want, cfg.Config.Labels[k], "label %s", k)
			}
			files := imageFiles(t, img)
			exe, ok := files["executor"]
			require.True(t, ok, "no /executor in the image")
			assert.Equal(t, elfMachine[p], exe.machine, "the binary's ELF machine")
		})
	}
}

// The docker tarball of each platform loads as the tag, with the same image.
func TestDockerTarballIsTheImage(t *testing.T) {
	idx := index(t, filepath.Join(dist, "image"))
	for _, p := range platforms {
		img, err := tarball.ImageFromPath(filepath.Join(dist, "image", "trainstep-"+strings.ReplaceAll(p, "/", "-")+".tar"), nil)
		require.NoError(t, err, p)
		want, err := platformImage(t, idx, p).ConfigName()
		require.NoError(t, err)
		got, err := img.ConfigName()
		require.NoError(t, err)
		assert.Equal(t, want, got, "%s: the tarball's image config differs from the layout's", p)
		manifest := readTarFile(t, filepath.Join(dist, "image", "trainstep-"+strings.ReplaceAll(p, "/", "-")+".tar"), "manifest.json")
		var m []struct{ RepoTags []string }
		require.NoError(t, json.Unmarshal(manifest, &m))
		require.Len(t, m, 1)
		assert.Equal(t, []string{imageRef}, m[0].RepoTags)
	}
}

// The Dockerfile (for users who build with Docker) ships what the image does: the binary at the
// same path, the same entrypoint, the same user.
func TestDockerfileAgreesWithTheImage(t *testing.T) {
	df := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	cfg, err := platformImage(t, index(t, filepath.Join(dist, "image")), "linux/amd64").ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, df.entrypoint, cfg.Config.Entrypoint, "ENTRYPOINT")
	assert.Equal(t, df.user, cfg.Config.User, "USER")
	assert.Equal(t, []string{df.binary}, cfg.Config.Entrypoint, "the Dockerfile's binary is not the entrypoint")
	files := imageFiles(t, platformImage(t, index(t, filepath.Join(dist, "image")), "linux/amd64"))
	f, ok := files[strings.TrimPrefix(df.binary, "/")]
	require.True(t, ok, "the image has no %s, where the Dockerfile copies the binary", df.binary)
	assert.Equal(t, int64(0o755), f.mode, "the binary's mode")
	assert.Contains(t, string(files["etc/passwd"].data), ":"+strings.Split(df.user, ":")[0]+":",
		"the image's /etc/passwd has no entry for the Dockerfile's user (distroless nonroot has one)")
	assert.Equal(t, "make build", df.build, "the Dockerfile's build stage builds what `make build` builds")
}

// dockerfile is what the Dockerfile's final stage ships.
type dockerfile struct {
	user, binary, build string
	entrypoint          []string
}

// parseDockerfile reads the instructions of the last stage (after the last FROM), and the
// build stage's RUN that builds the binary.
func parseDockerfile(t *testing.T, path string) dockerfile {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var df dockerfile
	var final bool
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		instr, rest, _ := strings.Cut(line, " ")
		switch strings.ToUpper(instr) {
		case "FROM":
			final, df = true, dockerfile{build: df.build}
		case "RUN":
			if strings.Contains(rest, "make build") {
				df.build = "make build"
			}
		case "USER":
			df.user = rest
		case "ENTRYPOINT":
			require.NoError(t, json.Unmarshal([]byte(rest), &df.entrypoint), "ENTRYPOINT must be the exec (JSON) form")
		case "COPY":
			fields := strings.Fields(rest)
			if len(fields) >= 2 && strings.HasSuffix(fields[len(fields)-2], "bin/executor") {
				df.binary = fields[len(fields)-1]
			}
		}
	}
	require.NoError(t, sc.Err())
	require.True(t, final, "the Dockerfile has no FROM")
	require.NotEmpty(t, df.binary, "the Dockerfile's last stage copies no bin/executor")
	require.NotEmpty(t, df.user, "the Dockerfile's last stage has no USER")
	return df
}

// imageFile is a regular file of an image's flattened filesystem.
type imageFile struct {
	mode    int64
	data    []byte
	machine uint16 // the ELF machine of an executable, else 0
}

// elfMachine is the ELF e_machine of each platform's binaries.
var elfMachine = map[string]uint16{"linux/amd64": 62, "linux/arm64": 183}

// imageFiles reads img's flattened filesystem: regular files by path (without the leading /).
func imageFiles(t *testing.T, img v1.Image) map[string]imageFile {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]imageFile{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		f := imageFile{mode: h.Mode, data: b}
		if len(b) > 20 && string(b[1:4]) == "ELF" {
			f.machine = uint16(b[18]) | uint16(b[19])<<8
		}
		files[strings.TrimPrefix(h.Name, "/")] = f
	}
	return files
}

// readTarFile is one file of a tar archive.
func readTarFile(t *testing.T, archive, name string) []byte {
	t.Helper()
	f, err := os.Open(archive)
	require.NoError(t, err)
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		require.NoError(t, err, "%s has no %s", archive, name)
		if h.Name == name {
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			return b
		}
	}
}
