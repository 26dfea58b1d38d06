// Package tektonrbac_test runs trainstep's Tekton face under Tekton's own pipelines controller
// as a user holding manifests/tekton/rbac.yaml's rules, or fewer, as after an upgrade whose new
// rule was not applied. test/e2e/tekton's controller runs as an admin over every namespace; here
// each test starts its own, limited to its namespace and its user, so no other controller acts on
// its runs. The Trainer simulator stands in for the Trainer.
package tektonrbac_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/test/internal/tektonharness"
	"github.com/trainstep/trainstep/test/internal/testenv"
	"github.com/trainstep/trainstep/test/internal/trainersim"
)

var (
	env       *testenv.Env
	sim       *trainersim.Simulator
	c         client.Client
	tektonCtl *tektonharness.Controller
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctrllog.SetLogger(logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := tektonharness.ControllerBinary(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	moduleDir, err := tektonharness.ModuleDir(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	start, stop := context.WithTimeout(ctx, 3*time.Minute)
	e, err := testenv.Start(start, testenv.Options{ControllerManager: true, CRDDirs: []string{tektonharness.CRDDir(moduleDir)}})
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
	if tektonCtl, err = tektonharness.Start(ctx, tektonharness.Options{Kubeconfig: env.Kubeconfig, Client: c, ModuleDir: moduleDir}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer tektonCtl.Stop()
	if sim, err = trainersim.Start(ctx, env.Config, trainersim.ByLabel); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
