package image

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Written is what Write put where.
type Written struct {
	// Digest is the multi-platform index's: what a release pins.
	Digest v1.Hash
	// Layout is the OCI image layout directory (`crane push <layout> <ref>` pushes the index, digest kept).
	Layout string
	// Tarballs are `docker load`-able archives by platform (os/arch), each tagged ref.
	Tarballs map[string]string
}

// Write writes idx to dir as an OCI layout (dir/oci, the index annotated with ref) and one
// `docker load` tarball per platform (dir/trainstep-<os>-<arch>.tar, tagged ref: Docker's archive
// holds one platform per tag), and dir/digest with the index's digest.
func Write(dir string, idx v1.ImageIndex, ref string) (Written, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return Written{}, fmt.Errorf("image name %q: use repository:tag, e.g. trainstep:dev: %w", ref, err)
	}
	digest, err := idx.Digest()
	if err != nil {
		return Written{}, err
	}
	w := Written{Digest: digest, Layout: filepath.Join(dir, "oci"), Tarballs: map[string]string{}}
	if err := os.RemoveAll(w.Layout); err != nil {
		return Written{}, err
	}
	p, err := layout.Write(w.Layout, empty.Index)
	if err != nil {
		return Written{}, fmt.Errorf("writing the OCI layout: %w", err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag.TagStr()})); err != nil {
		return Written{}, fmt.Errorf("writing the OCI layout: %w", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return Written{}, err
	}
	for _, m := range im.Manifests {
		img, err := idx.Image(m.Digest)
		if err != nil {
			return Written{}, err
		}
		plat := m.Platform.OS + "/" + m.Platform.Architecture
		f := filepath.Join(dir, "trainstep-"+m.Platform.OS+"-"+m.Platform.Architecture+".tar")
		if err := tarball.WriteToFile(f, tag, img); err != nil {
			return Written{}, fmt.Errorf("writing the %s tarball: %w", plat, err)
		}
		w.Tarballs[plat] = f
	}
	return w, os.WriteFile(filepath.Join(dir, "digest"), []byte(digest.String()+"\n"), 0o644)
}
