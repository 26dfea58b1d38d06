package tektonharness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/test/internal/testenv"
	"github.com/trainstep/trainstep/test/internal/trainersim"
)

// Bed is what a suite of the Tekton face under Tekton's own controller runs on, without a
// kubelet: the envtest control plane (with kube-controller-manager) and Tekton's CRDs, Tekton's
// pipelines controller, and the Trainer simulator deciding by label (trainersim.ByLabel).
// trainstep's controller is the suite's to start: as an admin over every namespace, or per test
// as a user with the manifests' RBAC.
type Bed struct {
	Env *testenv.Env
	// Client is an admin client that knows the CustomRun types.
	Client client.Client
	Tekton *Controller
	Sim    *trainersim.Simulator

	cancel context.CancelFunc
}

// StartBed starts the bed; Stop stops it.
func StartBed(ctx context.Context) (_ *Bed, err error) {
	if _, err := ControllerBinary(); err != nil {
		return nil, err
	}
	moduleDir, err := ModuleDir(ctx)
	if err != nil {
		return nil, err
	}
	start, stop := context.WithTimeout(ctx, 3*time.Minute)
	env, err := testenv.Start(start, testenv.Options{ControllerManager: true, CRDDirs: []string{CRDDir(moduleDir)}})
	stop()
	if err != nil {
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	b := &Bed{Env: env, cancel: cancel}
	defer func() {
		if err != nil {
			err = errors.Join(err, b.Stop())
		}
	}()
	scheme, err := tekton.Scheme()
	if err != nil {
		return nil, err
	}
	if b.Client, err = client.New(env.Config, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	if b.Tekton, err = Start(ctx, Options{Kubeconfig: env.Kubeconfig, Client: b.Client, ModuleDir: moduleDir}); err != nil {
		return nil, err
	}
	if b.Sim, err = trainersim.Start(ctx, env.Config, trainersim.ByLabel); err != nil {
		return nil, err
	}
	return b, nil
}

// Stop stops the simulator, Tekton's controller and the control plane.
func (b *Bed) Stop() error {
	b.cancel()
	if b.Tekton != nil {
		b.Tekton.Stop()
	}
	if err := b.Env.Stop(); err != nil {
		return fmt.Errorf("stopping the control plane: %w", err)
	}
	return nil
}
