// Package image_test builds trainstep's release as `make release` does (hack/release: the image
// with no container engine, the install files pinned by its digest), checks that the image is
// reproducible and agrees with the Dockerfile, and runs it: the amd64 image's filesystem is
// unpacked and each face's entrypoint started from it the way the install files say
// (container_test.go), against the real Trainer stack (test/internal/realstack) with Tekton's
// and Argo's CRDs.
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

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/internal/image"
	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/test/internal/argoharness"
	"github.com/trainstep/trainstep/test/internal/realstack"
	"github.com/trainstep/trainstep/test/internal/tektonharness"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// The release, commit and time the release is built with, as `make release` passes them.
const (
	stampVersion = "v0.0.0-image-e2e"
	stampCommit  = "89abcdef0123456789abcdef0123456789abcdef"
	repository   = "registry.example/trainstep"
	imageRef     = repository + ":" + stampVersion
)

var stampCreated = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// stepTimeout bounds a step's run to its end on the real stack: the Trainer's and JobSet's
// reconciles and kwok's stage delays, on a machine that runs other suites beside this one.
const stepTimeout = 3 * time.Minute

var (
	// stack is the real Trainer stack (test/internal/realstack) with Tekton's and Argo's CRDs.
	stack *realstack.Stack
	// c is an admin client that knows the Trainer's, Tekton's CustomRun and Argo's types.
	c client.Client
	// root is the repository; releaseTool and imageTool are hack/release and hack/image.
	root, releaseTool, imageTool string
	// dist is the release TestMain built: dist/image holds the image.
	dist string
	// platforms are the ones the release is built for: TRAINSTEP_IMAGE_PLATFORMS (comma-separated
	// os/arch), else every platform `make release` builds. `make test` builds linux/amd64 alone,
	// what the suite runs; cross-compiling arm64 is about 4 min of a cold run's CPU, and `make
	// test-compat` runs this suite with both.
	platforms = imagePlatforms()
)

func imagePlatforms() []string {
	if v := os.Getenv("TRAINSTEP_IMAGE_PLATFORMS"); v != "" {
		return strings.Split(v, ",")
	}
	return image.DefaultPlatforms
}

func envCfg() *rest.Config { return stack.Config }

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	testenv.QuietLogs()
	dir, err := os.MkdirTemp("", "trainstep-e2e-image-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := prepare(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	crds, err := crdPatterns()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The real Trainer, JobSet and their webhooks, with kwok's nodes running the TrainJobs' pods:
	// what the faces started from the image meet is what they meet in a cluster.
	return realstack.RunWith(m, &stack, func(ctx context.Context, s *realstack.Stack) (func(), error) {
		if err := s.InstallCRDs(ctx, crds...); err != nil {
			return nil, err
		}
		scheme, err := tekton.Scheme()
		if err != nil {
			return nil, err
		}
		if err := wfv1.AddToScheme(scheme); err != nil {
			return nil, err
		}
		c, err = client.New(s.Config, client.Options{Scheme: scheme})
		return func() {}, err
	})
}

// prepare builds hack/release and hack/image, and the release into dir/dist.
func prepare(dir string) error {
	var err error
	if root, err = filepath.Abs("../../.."); err != nil {
		return err
	}
	releaseTool, imageTool = filepath.Join(dir, "release"), filepath.Join(dir, "image")
	for tool, pkg := range map[string]string{releaseTool: "./hack/release", imageTool: "./hack/image"} {
		build := exec.Command("go", "build", "-o", tool, pkg)
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s: %w\n%s", pkg, err, out)
		}
	}
	dist = filepath.Join(dir, "dist")
	return buildRelease(context.Background(), dist)
}

// crdPatterns are Tekton's CRDs (from its module) and Argo's (from ARGO_ASSETS).
func crdPatterns() ([]string, error) {
	argo, err := argoharness.AssetsDir()
	if err != nil {
		return nil, err
	}
	tektonDir, err := tektonharness.ModuleDir(context.Background())
	if err != nil {
		return nil, err
	}
	return []string{filepath.Join(tektonharness.CRDDir(tektonDir), "*.yaml"), filepath.Join(argoharness.CRDDir(argo), "*.yaml")}, nil
}

// stamp are the flags both tools take to build from this "commit" for the platforms.
func stamp() []string {
	return []string{"--version", stampVersion, "--commit", stampCommit, "--created", strconv.FormatInt(stampCreated.Unix(), 10),
		"--platforms", strings.Join(platforms, ",")}
}

// buildRelease runs hack/release into out, as `make release` does.
func buildRelease(ctx context.Context, out string) error {
	return runTool(ctx, releaseTool, append([]string{"--out", out, "--repository", repository}, stamp()...)...)
}

// buildImage runs hack/image into out, as `make image` does.
func buildImage(ctx context.Context, out string) error {
	return runTool(ctx, imageTool, append([]string{"--out", out, "--image", imageRef}, stamp()...)...)
}

func runTool(ctx context.Context, tool string, args ...string) error {
	cmd := exec.CommandContext(ctx, tool, args...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", filepath.Base(tool), strings.Join(args, " "), err, b)
	}
	return nil
}

// index reads the multi-platform index from the OCI layout in imageDir.
func index(t *testing.T, imageDir string) v1.ImageIndex {
	t.Helper()
	p, err := layout.FromPath(filepath.Join(imageDir, "oci"))
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
