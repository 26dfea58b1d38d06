package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// file is one entry of a layer.
type file struct {
	name     string
	mode     int64
	uid, gid int
	dir      bool
	data     []byte
}

// baseFiles are what distroless static gives a non-root process and the Dockerfile's image
// therefore has: the user's passwd and group entries (the runtime sets HOME from them; a uid
// without one has no name), its home, and a /tmp anyone may write, which `executor run` as a
// container step needs (its --output-dir, /tmp/outputs in Argo's recipe; `--local`'s work
// directories). The long-running faces need none of them: test/e2e/image ran the Argo plugin, the
// janitor and the Tekton controller from an image without them, read-only. No shell, no CA roots
// and no zoneinfo: the executor talks only to the apiserver, whose CA comes with the
// ServiceAccount or the kubeconfig, and reads no time zone.
func baseFiles() []file {
	return []file{
		{name: "etc/", dir: true, mode: 0o755},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
			fmt.Sprintf("%s:x:%d:%d:%s:%s:/sbin/nologin\n", UserName, UID, GID, UserName, Home))},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\n" + fmt.Sprintf("%s:x:%d:\n", UserName, GID))},
		{name: "home/", dir: true, mode: 0o755},
		{name: "home/nonroot/", dir: true, mode: 0o700, uid: UID, gid: GID},
		{name: "root/", dir: true, mode: 0o700},
		{name: "tmp/", dir: true, mode: 0o1777},
	}
}

// Assemble is the image of one platform: the base layer, the binary's layer at BinaryPath and
// the config (entrypoint, user, labels), every time in it created.
func Assemble(exe []byte, goos, goarch string, labels map[string]string, created time.Time) (v1.Image, error) {
	base, err := layer(baseFiles(), created)
	if err != nil {
		return nil, err
	}
	bin, err := layer([]file{{name: BinaryPath[1:], mode: 0o755, data: exe}}, created)
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		OS: goos, Architecture: goarch, Created: v1.Time{Time: created},
		Config: v1.Config{
			Entrypoint: []string{BinaryPath},
			User:       User,
			Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			Labels:     labels,
		},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "trainstep: passwd, group, /home/nonroot, /tmp", Comment: "internal/image"}},
		mutate.Addendum{Layer: bin, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "trainstep: " + BinaryPath, Comment: "internal/image"}},
	)
}

// layer is a gzipped tar of files, each with the time created.
func layer(files []file, created time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.gid, ModTime: created, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer))
}
