// Package tekton_test proves the Tekton face against a real kube-apiserver with Tekton's own
// CustomRun CRD and the Trainer CRDs, with the Trainer simulator in place of the Trainer.
// Each test runs its own controller limited to its own namespace, so tests run in parallel.
package tekton_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/testenv"
	"github.com/trainstep/trainstep/internal/trainersim"
	"github.com/trainstep/trainstep/plugin/tekton"
)

var (
	env *testenv.Env
	sim *trainersim.Simulator
	// c reads and writes CustomRuns and TrainJobs straight from the apiserver.
	c client.Client
)

// SimMode is the TrainJob label (set through the step's labels param) telling the simulator what
// the job does; without it the trainer command really runs, locally.
const SimMode = "sim-mode"

func decide(tj *trainer.TrainJob) trainersim.Behavior {
	attempt, _ := strconv.Atoi(tj.Labels[trainjob.LabelAttempt])
	switch tj.Labels[SimMode] {
	case "hold":
		return trainersim.Behavior{Mode: trainersim.Hold}
	case "succeed":
		return trainersim.Behavior{Mode: trainersim.Succeed, Metrics: map[string]string{"loss": "0.25"}, Progress: ptr(int32(100))}
	case "fail":
		return trainersim.Behavior{Mode: trainersim.Fail, Log: []string{"Traceback (most recent call last):", "RuntimeError: CUDA out of memory"}}
	case "fail-twice":
		if attempt < 2 {
			return trainersim.Behavior{Mode: trainersim.Fail, Log: []string{"flaky: attempt " + strconv.Itoa(attempt)}}
		}
		return trainersim.Behavior{Mode: trainersim.Succeed}
	}
	return trainersim.Behavior{Mode: trainersim.RunLocally}
}

func ptr[T any](v T) *T { return &v }

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if os.Getenv("TEST_LOG") != "" {
		ctrllog.SetLogger(funcr.New(func(p, a string) { fmt.Fprintln(os.Stderr, p, a) }, funcr.Options{Verbosity: 1}))
	} else {
		ctrllog.SetLogger(logr.Discard())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	crds, err := TektonCRDs(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	start, stop := context.WithTimeout(ctx, 3*time.Minute)
	e, err := testenv.Start(start, testenv.Options{ControllerManager: true, CRDDirs: []string{crds}})
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
	if sim, err = trainersim.Start(ctx, env.Config, decide); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	scheme, err := tekton.Scheme()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if c, err = client.New(env.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// TektonCRDs is the CRD directory of the pinned Tekton module (go.mod requires it).
func TektonCRDs(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/tektoncd/pipeline").Output()
	if err != nil {
		return "", fmt.Errorf("locating the github.com/tektoncd/pipeline module (run `go mod download`): %w", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "config", "300-crds")
	if _, err := os.Stat(filepath.Join(dir, "300-customrun.yaml")); err != nil {
		return "", fmt.Errorf("tekton CRDs not found: %w", err)
	}
	return dir, nil
}
