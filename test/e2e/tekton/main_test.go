// Package tekton_test runs trainstep's Tekton face end to end against the real Tekton pipelines
// controller (built by `make test-assets` from the pinned module) run as a local process on the
// test apiserver by test/internal/tektonharness, without its webhook or a kubelet: Pipelines
// made only of custom tasks need neither. The Trainer simulator stands in for the Trainer.
package tekton_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/test/internal/tektonharness"
	"github.com/trainstep/trainstep/test/internal/testenv"
	"github.com/trainstep/trainstep/test/internal/trainersim"
)

var (
	env *testenv.Env
	sim *trainersim.Simulator
	c   client.Client
	// tektonCtl is Tekton's controller; its log is shown when a test fails.
	tektonCtl *tektonharness.Controller
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctrllog.SetLogger(logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bed, err := tektonharness.StartBed(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		cancel()
		if err := bed.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	env, c, tektonCtl, sim = bed.Env, bed.Client, bed.Tekton, bed.Sim
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

// dumpOnFailure shows the end of Tekton's log when the test failed.
func dumpOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Tekton controller log (end):\n%s", tektonCtl.LogTail(8000))
		}
	})
}
