// Package fault_test breaks things on purpose under the faces and checks that no training is
// lost, duplicated or orphaned: a network partition long enough for etcd to compact past what a
// face has seen (so its watch comes back to 410 Gone), and a kube-apiserver outage. The suite has
// its own control plane (no watch cache, compaction every second) because it stops it.
package fault_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/test/internal/testenv"
	"github.com/trainstep/trainstep/test/internal/trainersim"
)

var (
	env *testenv.Env
	sim *trainersim.Simulator
	c   client.Client
	bin string
)

// fate is the TrainJob label (a step's labels) that tells the simulator what the job does:
// succeed, fail, fail-first (attempt 0 fails, later ones succeed); anything else, or none, holds
// it running until the test finishes it with sim.Finish.
const fate = "fate"

func decide(tj *trainer.TrainJob) trainersim.Behavior {
	switch tj.Labels[fate] {
	case "succeed":
		return trainersim.Behavior{Mode: trainersim.Succeed}
	case "fail":
		return trainersim.Behavior{Mode: trainersim.Fail, Log: []string{"RuntimeError: soak failure"}}
	case "fail-first":
		if tj.Labels[trainjob.LabelAttempt] == "0" {
			return trainersim.Behavior{Mode: trainersim.Fail, Log: []string{"RuntimeError: first attempt"}}
		}
		return trainersim.Behavior{Mode: trainersim.Succeed}
	}
	return trainersim.Behavior{Mode: trainersim.Hold}
}

func TestMain(m *testing.M) {
	testenv.QuietLogs()
	dir, err := os.MkdirTemp("", "trainstep-fault-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "executor")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/executor").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the executor: %v\n%s", err, out)
		os.Exit(1)
	}
	tektonCRDs, err := moduleDir("github.com/tektoncd/pipeline", "config", "300-crds")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	argoCRDs, err := moduleDir("github.com/argoproj/argo-workflows/v3", "manifests", "base", "crds", "minimal")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	opts := testenv.Options{ControllerManager: true, CRDDirs: []string{tektonCRDs, argoCRDs}, APIServerArgs: map[string]string{
		// Watches go to etcd, and etcd forgets old revisions within seconds: a watch resumed from
		// what a face saw before a partition gets 410 Gone, as on a busy production cluster.
		"watch-cache":              "false",
		"etcd-compaction-interval": "1s",
	}}
	code := testenv.Run(m, &env, opts, func(ctx context.Context, e *testenv.Env) (err error) {
		if sim, err = trainersim.Start(ctx, e.Config, decide); err != nil {
			return err
		}
		scheme, err := tekton.Scheme()
		if err != nil {
			return err
		}
		if err := wfv1.AddToScheme(scheme); err != nil {
			return err
		}
		c, err = client.New(e.Config, client.Options{Scheme: scheme})
		return err
	})
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// moduleDir is a directory of a module go.mod requires, in the module cache.
func moduleDir(module string, elem ...string) (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module).Output()
	if err != nil {
		return "", fmt.Errorf("locating the %s module (go mod download): %w", module, err)
	}
	return filepath.Join(append([]string{strings.TrimSpace(string(out))}, elem...)...), nil
}
