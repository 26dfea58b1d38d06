// Package core_test proves the core against a real kube-apiserver with the real Trainer CRDs and
// stock runtimes, and the Trainer simulator in place of the Trainer controller.
package core_test

import (
	"context"
	"fmt"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/trainstep/trainstep/internal/testenv"
	"github.com/trainstep/trainstep/internal/trainersim"
)

var (
	env  *testenv.Env
	sim  *trainersim.Simulator
	kube kubernetes.Interface
	wc   client.WithWatch
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

// run starts the control plane and the simulator around the tests.
func run(m *testing.M) int {
	// envtest and the simulator's manager log through controller-runtime; keep test output clean.
	if os.Getenv("TEST_LOG") != "" {
		ctrllog.SetLogger(funcr.New(func(p, a string) { fmt.Fprintln(os.Stderr, p, a) }, funcr.Options{}))
	} else {
		ctrllog.SetLogger(logr.Discard())
		klog.SetLogger(logr.Discard()) // informers log a line when a finished wait stops them
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start, stop := context.WithTimeout(ctx, 3*time.Minute)
	e, err := testenv.Start(start, testenv.Options{ControllerManager: true})
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
	if sim, err = trainersim.Start(ctx, env.Config, trainersim.ByLabel); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if kube, err = kubernetes.NewForConfig(env.Config); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if wc, err = client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
