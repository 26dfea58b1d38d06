// Package tekton_test runs trainstep's Tekton face end to end against the real Tekton pipelines
// controller (built by `make test-assets` from the pinned module) run as a local process on the
// test apiserver, without its webhook or a kubelet: Pipelines made only of custom tasks need
// neither. The Trainer simulator stands in for the Trainer.
package tekton_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/test/internal/testenv"
	"github.com/trainstep/trainstep/test/internal/trainersim"
)

var (
	env *testenv.Env
	sim *trainersim.Simulator
	c   client.Client
	// tektonLog is the Tekton controller's output, shown when a test fails.
	tektonLog string
)

// SystemNamespace is where Tekton's config lives.
const SystemNamespace = "tekton-pipelines"

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctrllog.SetLogger(logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bin, err := tektonController()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	moduleDir, err := tektonModule(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	start, stop := context.WithTimeout(ctx, 3*time.Minute)
	e, err := testenv.Start(start, testenv.Options{ControllerManager: true, CRDDirs: []string{filepath.Join(moduleDir, "config", "300-crds")}})
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the control plane:", err)
		return 1
	}
	env = e
	defer func() {
		cancel()
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	}()
	scheme, err := tekton.Scheme()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if c, err = client.New(env.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := installTektonConfig(ctx, filepath.Join(moduleDir, "config")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	logDir, err := os.MkdirTemp("", "trainstep-e2e-tekton-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(logDir)
	tektonLog = filepath.Join(logDir, "tekton-controller.log")
	stopTekton, err := startTekton(bin, env.Kubeconfig, tektonLog)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stopTekton()
	if sim, err = trainersim.Start(ctx, env.Config, trainersim.ByLabel); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mgr, err := tekton.New(env.Config, tekton.Options{MetricsAddr: "0", ProbeAddr: "0", Logs: sim.Logs, Registerer: prometheus.NewRegistry()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "trainstep's Tekton controller stopped:", err)
		}
	}()
	return m.Run()
}

// tektonController is the binary `make test-assets` builds (hack/build-tekton.sh).
func tektonController() (string, error) {
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

func tektonModule(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/tektoncd/pipeline").Output()
	if err != nil {
		return "", fmt.Errorf("locating the github.com/tektoncd/pipeline module (run `go mod download`): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// installTektonConfig applies Tekton's namespace and config-*.yaml ConfigMaps (docs/testing.md,
// "How each engine runs"); RBAC, webhooks and Deployments are not needed for a local controller run as admin.
func installTektonConfig(ctx context.Context, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "config-*.yaml"))
	if err != nil {
		return err
	}
	files = append([]string{filepath.Join(dir, "100-namespace", "100-namespace.yaml")}, files...)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("reading Tekton's %s: %w", f, err)
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
			if err := c.Create(ctx, u); err != nil {
				return fmt.Errorf("applying %s %s from %s: %w", u.GetKind(), u.GetName(), f, err)
			}
		}
	}
	return nil
}

// startTekton runs Tekton's controller as its Deployment would (docs/testing.md); the image flags must be set
// but are never pulled (no kubelet, and custom tasks need no pods).
func startTekton(bin, kubeconfig, logFile string) (func(), error) {
	out, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-kubeconfig", kubeconfig,
		"-entrypoint-image", "x/entrypoint", "-nop-image", "x/nop", "-sidecarlogresults-image", "x/slr",
		"-workingdirinit-image", "x/wdi", "-shell-image", "x/busybox", "-shell-image-win", "x/pwsh")
	cmd.Env = append(os.Environ(),
		"SYSTEM_NAMESPACE="+SystemNamespace, "KUBERNETES_MIN_VERSION=v1.28.0",
		"CONFIG_DEFAULTS_NAME=config-defaults", "CONFIG_LOGGING_NAME=config-logging",
		"CONFIG_OBSERVABILITY_NAME=config-observability", "CONFIG_FEATURE_FLAGS_NAME=feature-flags",
		"CONFIG_LEADERELECTION_NAME=config-leader-election-controller", "CONFIG_SPIRE=config-spire",
		"METRICS_DOMAIN=tekton.dev/pipeline", "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("starting Tekton's controller %s: %w", bin, err)
	}
	return func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		out.Close()
	}, nil
}

// dumpOnFailure shows the end of Tekton's log when the test failed.
func dumpOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		b, _ := os.ReadFile(tektonLog)
		if len(b) > 8000 {
			b = b[len(b)-8000:]
		}
		t.Logf("Tekton controller log (end):\n%s", b)
	})
}
