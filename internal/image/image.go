// Package image builds trainstep's one image (every face runs from it) with no container engine
// and no base image from a registry: the static executor, cross-compiled per platform, on an
// empty base holding only what the binary needs to run as non-root. `make image` runs it through
// hack/image; the tests in test/e2e/image build it, build it again and run it.
//
// It uses github.com/google/go-containerregistry (ggcr) rather than ko, which is built on ggcr:
// ko takes its base from a registry (none is reachable here) and can add files only under
// /var/run/ko, so the passwd and group entries non-root needs could not be put in /etc; its
// module also pulls in far more code to compile. With ggcr the layers, config and labels are ours,
// byte for byte.
//
// Reproducible: the binary is built with -trimpath and fixed GOAMD64/GOARM64, every file in a
// layer has the same owner, mode and time (Options.Created, the commit's time), the config and
// history carry that time too, so two builds of one commit have one digest.
package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/trainstep/trainstep/internal/version"
)

// What the image is; the Dockerfile says the same (test/e2e/image checks that they agree).
const (
	// BinaryPath is where the executor is, and the entrypoint.
	BinaryPath = "/executor"
	// User is distroless's nonroot user, uid and gid 65532.
	User     = "65532:65532"
	UID, GID = 65532, 65532
	// UserName is its passwd name, as in distroless.
	UserName = "nonroot"
	// Home is its home directory.
	Home = "/home/nonroot"
)

// Label keys: the OCI ones, and trainstep's for the APIs the binary was built against.
const (
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
	LabelSource   = "org.opencontainers.image.source"
	LabelCreated  = "org.opencontainers.image.created"
	LabelTitle    = "org.opencontainers.image.title"
	LabelLicenses = "org.opencontainers.image.licenses"
	LabelTrainer  = "dev.trainstep.api.trainer"
	LabelArgo     = "dev.trainstep.api.argo"
	LabelTekton   = "dev.trainstep.api.tekton"
	LabelGo       = "dev.trainstep.go-version"
)

// DefaultPlatforms are the platforms `make image` builds: GPU clusters run arm64 nodes too.
var DefaultPlatforms = []string{"linux/amd64", "linux/arm64"}

// Options say what to build.
type Options struct {
	// Root is the repository's root (the module holding cmd/executor).
	Root string
	// Version and Commit are stamped into the binary (executor version) and the labels.
	Version, Commit string
	// Created is the time of every file, the config and the history: the commit's time, so
	// the digest depends on the commit only.
	Created time.Time
	// Source is the repository URL for org.opencontainers.image.source.
	Source string
	// Platforms are os/arch pairs (DefaultPlatforms when empty).
	Platforms []string
	// WorkDir holds the binaries built (a temporary directory when empty).
	WorkDir string
}

// Build cross-compiles the executor for each platform and returns the multi-platform index.
func Build(ctx context.Context, opts Options) (v1.ImageIndex, error) {
	if len(opts.Platforms) == 0 {
		opts.Platforms = DefaultPlatforms
	}
	if opts.WorkDir == "" {
		d, err := os.MkdirTemp("", "trainstep-image-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		opts.WorkDir = d
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range opts.Platforms {
		goos, goarch, ok := strings.Cut(p, "/")
		if !ok || goos != "linux" {
			return nil, fmt.Errorf("platform %q: use linux/<arch>, e.g. linux/amd64", p)
		}
		img, err := buildPlatform(ctx, opts, goarch)
		if err != nil {
			return nil, fmt.Errorf("building the %s image: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: goos, Architecture: goarch}}})
	}
	return idx, nil
}

// buildPlatform builds the binary for linux/goarch and the image around it.
func buildPlatform(ctx context.Context, opts Options, goarch string) (v1.Image, error) {
	bin := filepath.Join(opts.WorkDir, "executor-linux-"+goarch)
	if err := GoBuild(ctx, opts.Root, goarch, opts.Version, opts.Commit, bin); err != nil {
		return nil, err
	}
	info, err := version.Read(bin, opts.Version, opts.Commit)
	if err != nil {
		return nil, err
	}
	exe, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	return Assemble(exe, "linux", goarch, Labels(info, opts), opts.Created)
}

// GoBuild builds cmd/executor as `make build` does, for linux/goarch: static (CGO off), -trimpath,
// stripped, compiled without debug information (the Makefile's GOFLAGS: the same flags, so the two
// builds share the build cache), the release and commit linked in. GOAMD64 and GOARM64 are fixed so that a setting in
// the caller's environment does not change the binary.
func GoBuild(ctx context.Context, root, goarch, release, rev, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-tags=nomsgpack", "-gcflags=all=-dwarf=false",
		"-ldflags", "-s -w "+version.LDFlags(release, rev), "-o", out, "./cmd/executor")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch, "GOAMD64=v1", "GOARM64=v8.0", "GOFLAGS=", "GOTOOLCHAIN=local")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build for linux/%s: %w\n%s", goarch, err, b)
	}
	return nil
}

// Labels are the image's labels: the OCI ones and the APIs the binary reports in `executor version`.
func Labels(info version.Info, opts Options) map[string]string {
	return map[string]string{
		LabelTitle:    "trainstep",
		LabelLicenses: "Apache-2.0",
		LabelVersion:  info.Version,
		LabelRevision: info.Commit,
		LabelSource:   opts.Source,
		LabelCreated:  opts.Created.UTC().Format(time.RFC3339),
		LabelTrainer:  version.TrainerModule + "@" + info.Trainer,
		LabelArgo:     version.ArgoModule + "@" + info.Argo,
		LabelTekton:   "github.com/tektoncd/pipeline@" + info.Tekton,
		LabelGo:       info.GoVersion,
	}
}
