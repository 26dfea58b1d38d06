// Package conformance_test runs one table of step scenarios through every face of trainstep on
// one real stack (test/internal/realstack: the Trainer and JobSet managers with their webhooks,
// the Job controller, kube-scheduler and kwok Nodes, and Kueue with waitForPodsReady in front of
// the TrainJobs that name a queue): `executor run` as the built binary, the
// Argo executor plugin under Argo's own workflow-controller and agent, and trainstep's Tekton
// controller under Tekton's own. The faces share one lifecycle (core/lifecycle), so a scenario
// must end the same way through each, translated into the core's terms; where a face cannot do
// what the others do, the scenario says so and why.
package conformance_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/trainstep/trainstep/test/internal/argoharness"
	"github.com/trainstep/trainstep/test/internal/podrunner"
	"github.com/trainstep/trainstep/test/internal/realstack"
	"github.com/trainstep/trainstep/test/internal/tektonharness"
)

var (
	stack *realstack.Stack
	bin   string // the executor binary, built from this tree
	argo  *argoharness.Harness
	tk    *tektonharness.OnStack
	// served runs the Argo example's pods (realstack.Stack.ServePods).
	served *podrunner.Watch
)

// tokenSeconds is how long Argo's ServiceAccount tokens live: longer than the suite.
const tokenSeconds = 2 * 60 * 60

// parallel is how many subtests run at once unless -test.parallel says otherwise: they mostly
// wait on the stack's controllers and kwok's stage delays.
const parallel = "16"

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		if err := flag.Set("test.parallel", parallel); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	// Missing assets fail the suite before the stack starts, never skip it.
	if _, err := argoharness.AssetsDir(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if _, err := tektonharness.ControllerBinary(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The Argo example's pods run through the pod runner (argoharness.RunDAGExample), every other
	// pod on kwok.
	os.Exit(realstack.RunWithExecutor(m, &stack, &bin, realstack.Options{ServedPods: argoharness.DAGExampleServedPods()}, setUp))
}

// setUp starts Kueue, Tekton (its controller and trainstep's) and Argo (its controller, the
// plugin sidecar's process) on the stack. Kueue manages only TrainJobs with a queue label; its
// TrainJob webhooks, called for every TrainJob, let the others through unchanged.
func setUp(ctx context.Context, s *realstack.Stack) (_ func(), err error) {
	if _, err := realstack.StartKueue(ctx, s); err != nil {
		return nil, fmt.Errorf("starting Kueue: %w", err)
	}
	assets, err := argoharness.AssetsDir()
	if err != nil {
		return nil, err
	}
	if err := s.InstallCRDs(ctx, filepath.Join(argoharness.CRDDir(assets), "*.yaml")); err != nil {
		return nil, fmt.Errorf("installing Argo's CRDs: %w", err)
	}
	if tk, err = tektonharness.StartOnStack(ctx, s); err != nil {
		return nil, fmt.Errorf("starting Tekton: %w", err)
	}
	// Argo last: its harness may wait for another suite's Argo lock, and the set-up's deadline
	// keeps running through that wait (argoharness.Start gives itself a clock of its own after it).
	podOpts, err := s.PodRunnerOptions()
	if err != nil {
		tk.Stop()
		return nil, err
	}
	argo, err = argoharness.Start(ctx, argoharness.Options{
		Kubeconfig: s.Kubeconfig, Config: s.Config, Scheme: s.Scheme, Images: podOpts.Images, Hosts: podOpts.Hosts,
		ServiceAccountConfig: func(ctx context.Context, ns, sa string) (*rest.Config, error) {
			return s.ServiceAccountConfig(ctx, ns, sa, tokenSeconds)
		},
	})
	if err != nil {
		tk.Stop()
		return nil, fmt.Errorf("starting Argo: %w", err)
	}
	served = s.ServePods(context.WithoutCancel(ctx), argo.Pods)
	return func() {
		if err := served.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "running the served pods:", err)
		}
		tk.Stop()
		argo.Stop()
	}, nil
}
