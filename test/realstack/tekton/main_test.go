// Package tekton_test runs the Tekton face against the real Trainer stack: Tekton's own
// pipelines controller (test/internal/tektonharness) and trainstep's Tekton controller on the
// real stack of test/internal/realstack (the Trainer and JobSet managers with their webhooks,
// the Job controller, kube-scheduler and kwok Nodes). trainstep's controller authenticates with
// a ServiceAccount token from the TokenRequest API, and the apiserver authorizes with Node,RBAC,
// so manifests/tekton's RBAC is what it has; failing pods' logs come through pods/log. The
// Trainer's TrainJobStatus gate is on: its status server writes the progress the faces show.
package tekton_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/test/internal/podrunner"
	"github.com/trainstep/trainstep/test/internal/realstack"
	"github.com/trainstep/trainstep/test/internal/tektonharness"
)

var (
	stack     *realstack.Stack
	c         client.Client // admin, knows the CustomRun types
	tektonCtl *tektonharness.Controller
	// pods runs the pods of served namespaces (stack.ServedNamespace) as local processes: TaskRun
	// pods with Tekton's entrypoint, the TrainJobs' pods with the host's python.
	pods   *podrunner.Runner
	served *podrunner.Watch
)

// trainstep's controller runs as the ServiceAccount manifests/tekton creates.
const (
	controllerNamespace = "trainstep-system"
	controllerSA        = "trainstep-tekton-controller"
	tokenSeconds        = 2 * 60 * 60 // longer than the suite
)

func TestMain(m *testing.M) {
	// Missing Tekton assets fail the suite before the stack starts, never skip it.
	if _, err := tektonharness.EntrypointBinary(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(realstack.RunWithOptions(m, &stack, realstack.Options{TrainJobStatus: true, ServedPods: catalogTaskServedPods()}, setUp))
}

func setUp(ctx context.Context, s *realstack.Stack) (_ func(), err error) {
	moduleDir, err := tektonharness.ModuleDir(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.InstallCRDs(ctx, filepath.Join(tektonharness.CRDDir(moduleDir), "*.yaml")); err != nil {
		return nil, err
	}
	scheme, err := tekton.Scheme()
	if err != nil {
		return nil, err
	}
	if c, err = client.New(s.Config, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	if tektonCtl, err = tektonharness.Start(ctx, tektonharness.Options{Kubeconfig: s.Kubeconfig, Client: c, ModuleDir: moduleDir}); err != nil {
		return nil, err
	}
	podOpts, err := s.PodRunnerOptions()
	if err != nil {
		return nil, err
	}
	images, err := tektonharness.PodImages()
	if err != nil {
		return nil, err
	}
	podOpts.Images = append(podOpts.Images, images...)
	// The trainstep image of the catalog-style Task (examples/workflows/tekton-train-task.yaml).
	image, removeBin, err := realstack.TrainstepImage()
	if err != nil {
		return nil, err
	}
	podOpts.Images = append(podOpts.Images, image)
	if pods, err = podrunner.New(ctx, podOpts); err != nil {
		removeBin()
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	served = s.ServePods(runCtx, pods)
	stopped := make(chan struct{})
	tearDown := func() {
		cancel()
		<-stopped
		if err := served.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "running the served pods:", err)
		}
		_ = pods.Close()
		removeBin()
		tektonCtl.Stop()
	}
	defer func() {
		if err != nil {
			close(stopped)
			tearDown()
		}
	}()

	// trainstep's controller: manifests/tekton's namespace, ServiceAccount and RBAC (not its
	// Deployment: the controller runs in this process), as that ServiceAccount.
	root, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return nil, fmt.Errorf("locating the trainstep module: %w", err)
	}
	manifests := filepath.Join(strings.TrimSpace(string(root)), "manifests", "tekton")
	if err := tektonharness.Apply(ctx, c, filepath.Join(manifests, "namespace.yaml"),
		filepath.Join(manifests, "serviceaccount.yaml"), filepath.Join(manifests, "rbac.yaml")); err != nil {
		return nil, err
	}
	cfg, err := s.ServiceAccountConfig(ctx, controllerNamespace, controllerSA, tokenSeconds)
	if err != nil {
		return nil, err
	}
	mgr, err := tekton.New(cfg, tekton.Options{MetricsAddr: "0", ProbeAddr: "0", Registerer: prometheus.NewRegistry()})
	if err != nil {
		return nil, err
	}
	go func() {
		defer close(stopped)
		if err := mgr.Start(runCtx); err != nil {
			fmt.Fprintln(os.Stderr, "trainstep's Tekton controller stopped:", err)
		}
	}()
	return tearDown, nil
}

// dumpOnFailure shows the end of Tekton's log, and of every served pod's containers, when the
// test failed.
func dumpOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Tekton controller log (end):\n%s", tektonCtl.LogTail(8000))
			var b strings.Builder
			pods.DumpLogs(&b, 40)
			if err := served.Err(); err != nil {
				fmt.Fprintf(&b, "running the served pods: %v\n", err)
			}
			if b.Len() > 0 {
				t.Logf("served pods:\n%s", b.String())
			}
		}
	})
}
