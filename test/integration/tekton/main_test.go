// Package tekton_test proves the Tekton face against a real kube-apiserver with Tekton's own
// CustomRun CRD, the Trainer CRDs and Kueue's Workload CRD (no Kueue runs: a test makes the
// Workloads it needs), with the Trainer simulator in place of the Trainer.
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

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/test/internal/testenv"
	"github.com/trainstep/trainstep/test/internal/trainersim"
)

var (
	env *testenv.Env
	// auditLog is the apiserver's audit log: every request of benchUser, and nobody else's.
	auditLog string
	sim      *trainersim.Simulator
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
	case "no-resources":
		return trainersim.Behavior{Mode: trainersim.NoResources}
	case "fail-twice":
		if attempt < 2 {
			return trainersim.Behavior{Mode: trainersim.Fail, Log: []string{"flaky: attempt " + strconv.Itoa(attempt)}}
		}
		return trainersim.Behavior{Mode: trainersim.Succeed}
	}
	return trainersim.Behavior{Mode: trainersim.RunLocally}
}

func ptr[T any](v T) *T { return &v }

func TestMain(m *testing.M) {
	testenv.QuietLogs()
	crds, err := TektonCRDs(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	workloads, err := testenv.KueueWorkloadCRD(context.Background(), testenv.KueueVersion)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "trainstep-tekton-audit-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	auditArgs, err := auditOnly(dir, benchUser)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	auditLog = auditArgs["audit-log-path"]
	code := testenv.Run(m, &env, testenv.Options{ControllerManager: true, CRDDirs: []string{crds, workloads}, APIServerArgs: auditArgs}, func(ctx context.Context, e *testenv.Env) (err error) {
		if sim, err = trainersim.Start(ctx, e.Config, decide); err != nil {
			return err
		}
		scheme, err := tekton.Scheme()
		if err != nil {
			return err
		}
		c, err = client.New(e.Config, client.Options{Scheme: scheme})
		return err
	})
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// auditOnly returns the kube-apiserver flags that write an audit log in dir of user's requests
// alone (metadata: verb, resource, response code), so a benchmark can count what the controller
// it runs as user asks of the apiserver without a proxy in the way. Nothing else is logged: the
// other tests pay nothing for it.
func auditOnly(dir, user string) (map[string]string, error) {
	policy := filepath.Join(dir, "policy.yaml")
	err := os.WriteFile(policy, []byte(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  users: [`+user+`]
- level: None
`), 0o600)
	if err != nil {
		return nil, fmt.Errorf("writing the audit policy: %w", err)
	}
	return map[string]string{
		"audit-policy-file": policy,
		"audit-log-path":    filepath.Join(dir, "audit.log"),
		// Never rotated (the default rotates at 100 MB): the benchmark reads on from an offset.
		"audit-log-maxsize": "100000",
	}, nil
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
