// Package argo_test runs the Argo face against the real Trainer stack: Argo's own
// workflow-controller and agent (test/internal/argoharness) with the real `executor argo-plugin`
// binary, on the real stack of test/internal/realstack (the Trainer and JobSet managers with
// their webhooks, the Job controller, kube-scheduler and kwok Nodes). The plugin and the agent
// authenticate with ServiceAccount tokens from the TokenRequest API, and the apiserver
// authorizes with Node,RBAC, so manifests/argo's RBAC is what they have. The stack is a MultiKueue
// manager (test/internal/realstack/multikueue.go) with a worker stack of its own.
package argo_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/trainstep/trainstep/test/internal/argoharness"
	"github.com/trainstep/trainstep/test/internal/podrunner"
	"github.com/trainstep/trainstep/test/internal/realstack"
)

var (
	stack   *realstack.Stack
	harness *argoharness.Harness
	// worker is the MultiKueue worker stack the suite's stack, its manager, dispatches to.
	worker *realstack.Stack
	// served runs the served pods of the suite (exampleServedPods) as local processes.
	served *podrunner.Watch
)

// tokenSeconds is how long the ServiceAccount tokens live: longer than the suite.
const tokenSeconds = 2 * 60 * 60

func TestMain(m *testing.M) {
	// Missing Argo assets fail the suite before the stack starts, never skip it.
	if _, err := argoharness.AssetsDir(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(realstack.RunWithOptions(m, &stack, realstack.Options{TrainJobStatus: true, ServedPods: exampleServedPods()}, setUp))
}

// exampleServedPods are the pods the suite's pod runner serves: the Argo example's
// (argoharness.DAGExampleServedPods) and the container recipe's. Every other pod of the suite runs
// on kwok.
func exampleServedPods() []string {
	// examples/workflows/argo-container-step.yaml: its workflows, and its TrainJobs (namePrefix recipe-).
	return append(argoharness.DAGExampleServedPods(),
		argoharness.Namespace+"/"+containerStepWorkflow+"-", argoharness.Namespace+"/recipe-")
}

// setUp makes the stack a MultiKueue manager (Kueue manages only TrainJobs with a queue label)
// with a worker stack of its own, and starts Argo on it.
func setUp(ctx context.Context, s *realstack.Stack) (_ func(), err error) {
	w, stopWorker, err := realstack.StartMultiKueue(ctx, s)
	if err != nil {
		return nil, err
	}
	worker = w
	defer func() {
		if err != nil {
			stopWorker()
		}
	}()
	assets, err := argoharness.AssetsDir()
	if err != nil {
		return nil, err
	}
	if err := s.InstallCRDs(ctx, filepath.Join(argoharness.CRDDir(assets), "*.yaml")); err != nil {
		return nil, err
	}
	podOpts, err := s.PodRunnerOptions()
	if err != nil {
		return nil, err
	}
	// The trainstep image of the container recipe (examples/workflows/argo-container-step.yaml).
	image, removeBin, err := realstack.TrainstepImage()
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			removeBin()
		}
	}()
	podOpts.Images = append(podOpts.Images, image)
	harness, err = argoharness.Start(ctx, argoharness.Options{
		Kubeconfig: s.Kubeconfig, Config: s.Config, Scheme: s.Scheme, Images: podOpts.Images, Hosts: podOpts.Hosts,
		ServiceAccountConfig: func(ctx context.Context, ns, sa string) (*rest.Config, error) {
			return s.ServiceAccountConfig(ctx, ns, sa, tokenSeconds)
		},
	})
	if err != nil {
		return nil, err
	}
	// The served pods (realstack.Stack.Serves) run through the harness's pod runner, with
	// argoexec and python on their PATH, as their own ServiceAccounts.
	served = s.ServePods(context.WithoutCancel(ctx), harness.Pods)
	return func() {
		if err := served.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "running the served pods:", err)
		}
		harness.Stop()
		stopWorker()
		removeBin()
	}, nil
}
