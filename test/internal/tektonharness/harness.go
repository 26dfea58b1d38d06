// Package tektonharness runs Tekton's own pipelines controller (built by `make test-assets` from
// the pinned module) as a local process against any test apiserver (the envtest bed of
// test/e2e/tekton or the real stack of test/realstack/tekton), without its webhook or a kubelet:
// Pipelines made only of custom tasks need neither. It also holds the PipelineRun helpers both
// suites use.
package tektonharness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/test/internal/harnessutil"
	"github.com/trainstep/trainstep/test/internal/podrunner"
)

// SystemNamespace is where Tekton's config lives.
const SystemNamespace = "tekton-pipelines"

// ControllerBinary is the binary `make test-assets` builds (hack/build-tekton.sh).
func ControllerBinary() (string, error) {
	dir := os.Getenv("TEKTON_ASSETS")
	if dir == "" {
		return "", errors.New("TEKTON_ASSETS is not set: run `make test-assets` to build Tekton's pipelines controller, " +
			"then set TEKTON_ASSETS to the directory that holds it (`make test` and `make test-e2e` do both)")
	}
	bin := filepath.Join(dir, "tekton-controller")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("TEKTON_ASSETS=%s has no tekton-controller (%w): run `make test-assets` to build it", dir, err)
	}
	return bin, nil
}

// The images Tekton's controller is told to put in pods (its -*-image flags). Never pulled: a
// pod runner maps them to local binaries (PodImages).
const (
	EntrypointImage = "x/entrypoint"
	NopImage        = "x/nop"
	ShellImage      = "x/busybox"
)

// EntrypointBinary is Tekton's entrypoint, built beside the controller by `make test-assets`
// (hack/build-tekton.sh).
func EntrypointBinary() (string, error) {
	ctl, err := ControllerBinary()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(filepath.Dir(ctl), "tekton-entrypoint")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("TEKTON_ASSETS has no tekton-entrypoint (%w): run `make test-assets` to build it", err)
	}
	return bin, nil
}

// PodImages say what the images Tekton's controller puts in a TaskRun's pod hold, for a pod
// runner (test/internal/podrunner): the entrypoint image's /ko-app/entrypoint (the prepare init
// container copies it into the pod, every step runs under it) is the built entrypoint; the nop
// image, which the affinity assistant's pod runs with tekton_run_indefinitely, waits until
// stopped; the shell image's sh (the place-scripts init container) is the host's.
func PodImages() ([]podrunner.Image, error) {
	bin, err := EntrypointBinary()
	if err != nil {
		return nil, err
	}
	return []podrunner.Image{
		{Prefix: EntrypointImage, Files: map[string]string{"/ko-app/entrypoint": bin}},
		{Prefix: NopImage, Entrypoint: []string{"sh", "-c", `trap "exit 0" TERM; while :; do sleep 1; done`, "nop"}},
		{Prefix: ShellImage},
	}, nil
}

// ModuleDir is the directory whose config/ holds the CRDs and config-*.yaml (feature flags among
// them) of the Tekton release under test: TEKTON_ASSETS when hack/build-tekton.sh copied that
// release's config beside its controller, so `make test-compat` runs each release with its own
// CRDs and defaults; otherwise the github.com/tektoncd/pipeline module of go.mod.
func ModuleDir(ctx context.Context) (string, error) {
	if dir := os.Getenv("TEKTON_ASSETS"); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "config", "300-crds")); err == nil {
			return dir, nil
		}
	}
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/tektoncd/pipeline").Output()
	if err != nil {
		return "", fmt.Errorf("locating the github.com/tektoncd/pipeline module (run `go mod download`): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// CRDDir is the directory of Tekton's CRDs in the module.
func CRDDir(moduleDir string) string { return filepath.Join(moduleDir, "config", "300-crds") }

// Options says where to run the controller.
type Options struct {
	// Kubeconfig is an admin kubeconfig file: the controller runs as admin (its RBAC and
	// Deployment are not what is under test).
	Kubeconfig string
	// Client creates Tekton's namespace and ConfigMaps.
	Client client.Client
	// ModuleDir is the Tekton module's directory (ModuleDir).
	ModuleDir string
}

// Controller is a running Tekton controller.
type Controller struct {
	// LogFile is the controller's output.
	LogFile string
	cmd     *exec.Cmd
	out     *os.File
	dir     string
}

// Start applies Tekton's namespace and config-*.yaml ConfigMaps, then runs Tekton's controller
// as its Deployment would (docs/testing.md), on free ports for its probes, profiling and
// metrics servers so that two suites can run at once. The image flags must be set but are never
// pulled: where TaskRun pods run, a pod runner maps them to local binaries (PodImages). Tekton's
// CRDs must be installed.
func Start(ctx context.Context, opts Options) (*Controller, error) {
	bin, err := ControllerBinary()
	if err != nil {
		return nil, err
	}
	if err := installConfig(ctx, opts.Client, filepath.Join(opts.ModuleDir, "config")); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "trainstep-tektonharness-")
	if err != nil {
		return nil, err
	}
	c := &Controller{LogFile: filepath.Join(dir, "tekton-controller.log"), dir: dir}
	if c.out, err = os.Create(c.LogFile); err != nil {
		return nil, err
	}
	ports, err := harnessutil.FreePorts(3)
	if err != nil {
		return nil, err
	}
	c.cmd = exec.Command(bin, "-kubeconfig", opts.Kubeconfig,
		"-entrypoint-image", EntrypointImage, "-nop-image", NopImage, "-sidecarlogresults-image", "x/slr",
		"-workingdirinit-image", "x/wdi", "-shell-image", ShellImage, "-shell-image-win", "x/pwsh")
	c.cmd.Env = append(os.Environ(),
		"SYSTEM_NAMESPACE="+SystemNamespace, "KUBERNETES_MIN_VERSION=v1.28.0",
		"CONFIG_DEFAULTS_NAME=config-defaults", "CONFIG_LOGGING_NAME=config-logging",
		"CONFIG_OBSERVABILITY_NAME=config-observability", "CONFIG_FEATURE_FLAGS_NAME=feature-flags",
		"CONFIG_LEADERELECTION_NAME=config-leader-election-controller", "CONFIG_SPIRE=config-spire",
		"METRICS_DOMAIN=tekton.dev/pipeline", "KUBECONFIG="+opts.Kubeconfig,
		// Its fixed defaults (8080, 8008, 9090) would collide with another suite's controller;
		// a probes or profiling server that cannot listen stops the controller.
		"PROBES_PORT="+strconv.Itoa(ports[0]), "PROFILING_PORT="+strconv.Itoa(ports[1]),
		"METRICS_PROMETHEUS_PORT="+strconv.Itoa(ports[2]))
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	c.cmd.SysProcAttr = childProcAttr()
	if err := c.cmd.Start(); err != nil {
		c.out.Close()
		return nil, fmt.Errorf("starting Tekton's controller %s: %w", bin, err)
	}
	return c, nil
}

// Stop ends the controller (SIGTERM, then SIGKILL after 10 s) and removes its log.
func (c *Controller) Stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
	c.out.Close()
	_ = os.RemoveAll(c.dir)
}

// LogTail is the end of the controller's log.
func (c *Controller) LogTail(n int) string {
	b, _ := os.ReadFile(c.LogFile)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// installConfig applies Tekton's namespace and config-*.yaml ConfigMaps (docs/testing.md,
// "How each engine runs"); RBAC, webhooks and Deployments are not needed for a local controller
// run as admin.
func installConfig(ctx context.Context, c client.Client, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "config-*.yaml"))
	if err != nil {
		return err
	}
	files = append([]string{filepath.Join(dir, "100-namespace", "100-namespace.yaml")}, files...)
	return Apply(ctx, c, files...)
}

// Apply creates every object of the YAML files; one already there is kept.
func Apply(ctx context.Context, c client.Client, files ...string) error {
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("reading %s: %w", f, err)
		}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return fmt.Errorf("decoding %s: %w", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			if err := c.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("applying %s %s from %s: %w", u.GetKind(), u.GetName(), f, err)
			}
		}
	}
	return nil
}
