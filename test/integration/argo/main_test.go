// Package argo_test proves the Argo executor plugin against a real kube-apiserver with the Trainer
// and Argo CRDs, the Trainer simulator in place of the Trainer controller and requests encoded with
// Argo's own types.
package argo_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/pkg/plugins/executor"
	"github.com/google/uuid"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/argo"
	"github.com/trainstep/trainstep/test/internal/argotest"
	"github.com/trainstep/trainstep/test/internal/testenv"
	"github.com/trainstep/trainstep/test/internal/trainersim"
)

var (
	env *testenv.Env
	sim *trainersim.Simulator
	c   client.Client // knows Trainer and Argo types
)

// SimMode is the step label that tells the simulator what the TrainJob does.
const SimMode = "sim-mode"

func decide(tj *trainer.TrainJob) trainersim.Behavior {
	switch tj.Labels[SimMode] {
	case "hold":
		return trainersim.Behavior{Mode: trainersim.Hold}
	case "succeed":
		return trainersim.Behavior{Mode: trainersim.Succeed, Metrics: map[string]string{"loss": "0.125"}}
	case "fail":
		return trainersim.Behavior{Mode: trainersim.Fail, Log: []string{"Traceback (most recent call last):", "RuntimeError: CUDA out of memory"}}
	case "no-resources":
		return trainersim.Behavior{Mode: trainersim.NoResources}
	}
	return trainersim.Behavior{Mode: trainersim.RunLocally}
}

func TestMain(m *testing.M) {
	testenv.QuietLogs()
	crds, err := ArgoCRDs(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Kueue's Workload CRD alone, no Kueue: tests write the Workloads Kueue would.
	workloads, err := testenv.KueueWorkloadCRD(context.Background(), testenv.KueueVersion)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(testenv.Run(m, &env, testenv.Options{ControllerManager: true, CRDDirs: []string{crds, workloads}}, func(ctx context.Context, e *testenv.Env) (err error) {
		if sim, err = trainersim.Start(ctx, e.Config, decide); err != nil {
			return err
		}
		scheme := e.Scheme
		if err := wfv1.AddToScheme(scheme); err != nil {
			return err
		}
		c, err = client.New(e.Config, client.Options{Scheme: scheme})
		return err
	}))
}

// ArgoCRDs is the directory of Argo's minimal CRDs in the pinned module (go.mod requires it).
func ArgoCRDs(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", "github.com/argoproj/argo-workflows/v3").Output()
	if err != nil {
		return "", fmt.Errorf("locating Argo's module (go mod download): %w", err)
	}
	const key = `"Dir": "`
	s := string(out)
	i := strings.Index(s, key)
	if i < 0 {
		return "", fmt.Errorf("go mod download printed no Dir: %s", s)
	}
	dir, _, _ := strings.Cut(s[i+len(key):], `"`)
	return filepath.Join(dir, "manifests", "base", "crds", "minimal"), nil
}

// harness is one running plugin.
type harness struct {
	URL       string
	Metrics   string // the metrics server's URL
	Token     string
	TokenFile string
	Namespace string
	Plugin    *argo.Plugin
	stop      func()
}

// startPlugin runs a plugin for ns on a free port until the test ends (or h.stop()).
func startPlugin(t testing.TB, ns string, mod func(*argo.Options)) *harness {
	t.Helper()
	return startPluginWith(t, env.Config, ns, mod)
}

// startPluginWith is startPlugin on a config of the caller's (one that counts requests).
func startPluginWith(t testing.TB, cfg *rest.Config, ns string, mod func(*argo.Options)) *harness {
	t.Helper()
	dir := t.TempDir()
	token := uuid.NewString()
	tokenFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(token), 0o440))
	opts := argo.Options{TokenFile: tokenFile, Namespace: ns, HoldMax: 5 * time.Second, Requeue: time.Second, Logs: sim.Logs, MetricsAddr: "127.0.0.1:0"}
	if mod != nil {
		mod(&opts)
	}
	p, err := argo.New(cfg, opts)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln) }()
	h := &harness{URL: "http://" + ln.Addr().String(), Token: token, TokenFile: tokenFile, Namespace: ns, Plugin: p}
	stopped := false
	h.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("the plugin did not stop within 30s")
		}
	}
	t.Cleanup(h.stop)
	require.Eventually(t, func() bool { return get(t, h.URL+"/readyz") == "ok" }, testenv.Timeout, testenv.Interval, "the plugin must become ready")
	h.Metrics = "http://" + p.MetricsAddr()
	return h
}

// workflow creates a Workflow object (no controller runs it here) and returns it.
func workflow(t testing.TB, ns string) *wfv1.Workflow {
	t.Helper()
	wf := &wfv1.Workflow{}
	wf.Namespace, wf.GenerateName = ns, "wf-"
	wf.Spec.Entrypoint = "main"
	wf.Spec.Templates = []wfv1.Template{{Name: "main", Suspend: &wfv1.SuspendTemplate{}}}
	// What Argo's controller records when it starts the workflow, before it hands any node to the
	// agent. A minute ago, so that an `argo retry` in the test falls in another second.
	wf.Status.Phase = wfv1.WorkflowRunning
	wf.Status.StartedAt = metav1.NewTime(time.Now().Add(-time.Minute))
	require.NoError(t, c.Create(t.Context(), wf))
	return wf
}

func get(t testing.TB, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, http.NoBody)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// wfArgs creates a Workflow (the TrainJob's owner: without it the garbage collector deletes the
// TrainJob) and returns an execute request of one of its trainstep templates.
func wfArgs(t testing.TB, ns, body string, opts ...func(*wfv1.Template)) (executor.ExecuteTemplateArgs, error) {
	t.Helper()
	wf := workflow(t, ns)
	return argotest.Args(wf.Name, ns, string(wf.UID), body, opts...)
}

// startStep makes the first call of a step whose TrainJob the simulator treats as mode (sim-mode),
// as the agent makes it, and returns the call's arguments (to call again) and the TrainJob's name.
func startStep(t *testing.T, h *harness, wf *wfv1.Workflow, mode string) (executor.ExecuteTemplateArgs, string) {
	t.Helper()
	args, err := argotest.Args(wf.Name, wf.Namespace, string(wf.UID), step("train", mode))
	require.NoError(t, err)
	r, err := argotest.Execute(t.Context(), h.URL, h.Token, args)
	require.NoError(t, err)
	require.NotNil(t, r.Node, "body: %s", r.Body)
	name, _ := r.Output(trainjob.OutName)
	require.NotEmpty(t, name, r.Node.Message)
	return args, name
}
