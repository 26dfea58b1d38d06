package tektonharness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/test/internal/realstack"
)

// OnStack is Tekton's pipelines controller and trainstep's Tekton controller (in this process,
// as manifests/tekton's ServiceAccount with its RBAC) on a real stack.
type OnStack struct {
	// Client is an admin client of the stack that knows the CustomRun types.
	Client     client.Client
	Controller *Controller
	stop       func()
}

// Stop stops both controllers.
func (o *OnStack) Stop() { o.stop() }

// StartOnStack installs Tekton's CRDs on s and starts both controllers; ctx bounds the start.
func StartOnStack(ctx context.Context, s *realstack.Stack) (_ *OnStack, err error) {
	moduleDir, err := ModuleDir(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.InstallCRDs(ctx, filepath.Join(CRDDir(moduleDir), "*.yaml")); err != nil {
		return nil, err
	}
	scheme, err := tekton.Scheme()
	if err != nil {
		return nil, err
	}
	o := &OnStack{}
	if o.Client, err = client.New(s.Config, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	if o.Controller, err = Start(ctx, Options{Kubeconfig: s.Kubeconfig, Client: o.Client, ModuleDir: moduleDir}); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	o.stop = func() {
		cancel()
		<-stopped
		o.Controller.Stop()
	}
	defer func() {
		if err != nil {
			close(stopped)
			o.stop()
		}
	}()
	root, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return nil, fmt.Errorf("locating the trainstep module: %w", err)
	}
	manifests := filepath.Join(strings.TrimSpace(string(root)), "manifests", "tekton")
	if err := Apply(ctx, o.Client, filepath.Join(manifests, "namespace.yaml"),
		filepath.Join(manifests, "serviceaccount.yaml"), filepath.Join(manifests, "rbac.yaml")); err != nil {
		return nil, err
	}
	const tokenSeconds = 2 * 60 * 60 // longer than a suite
	cfg, err := s.ServiceAccountConfig(ctx, "trainstep-system", "trainstep-tekton-controller", tokenSeconds)
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
	return o, nil
}
