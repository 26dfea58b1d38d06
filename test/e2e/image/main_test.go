// Package image_test builds trainstep's image as `make image` does (hack/image, no container
// engine), checks that it is reproducible and agrees with the Dockerfile, and runs it: the amd64
// image's filesystem is unpacked and each face's entrypoint started from it (chroot, its own
// mount and PID namespaces, the user the manifests give it) against the real apiserver.
package image_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// The release, commit and time the image is built with, as `make image` passes them.
const (
	stampVersion = "v0.0.0-image-e2e"
	stampCommit  = "89abcdef0123456789abcdef0123456789abcdef"
	imageRef     = "trainstep:e2e"
)

var stampCreated = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

var (
	// root is the repository; tool is hack/image built once.
	root, tool string
	// built is the first build's output directory.
	built string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "trainstep-e2e-image-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if root, err = filepath.Abs("../../.."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tool = filepath.Join(dir, "image")
	build := exec.Command("go", "build", "-o", tool, "./hack/image")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building hack/image: %v\n%s", err, out)
		return 1
	}
	built = filepath.Join(dir, "build1")
	if err := buildImage(context.Background(), built); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// buildImage runs hack/image into out, as `make image` does.
func buildImage(ctx context.Context, out string) error {
	cmd := exec.CommandContext(ctx, tool, "--out", out, "--image", imageRef, "--version", stampVersion, "--commit", stampCommit,
		"--created", strconv.FormatInt(stampCreated.Unix(), 10))
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the image (hack/image): %w\n%s", err, b)
	}
	return nil
}

// index reads the multi-platform index from the OCI layout in out.
func index(t *testing.T, out string) v1.ImageIndex {
	t.Helper()
	p, err := layout.FromPath(filepath.Join(out, "oci"))
	if err != nil {
		t.Fatalf("reading the OCI layout: %v", err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("the layout's index.json has %d entries, want the one image index", len(im.Manifests))
	}
	idx, err := top.ImageIndex(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// platformImage is the image of os/arch in idx.
func platformImage(t *testing.T, idx v1.ImageIndex, platform string) v1.Image {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var have []string
	for _, m := range im.Manifests {
		p := m.Platform.OS + "/" + m.Platform.Architecture
		if p == platform {
			img, err := idx.Image(m.Digest)
			if err != nil {
				t.Fatal(err)
			}
			return img
		}
		have = append(have, p)
	}
	t.Fatalf("the image has no %s manifest (it has %s)", platform, strings.Join(have, ", "))
	return nil
}
