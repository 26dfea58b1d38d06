package fault_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
	"github.com/trainstep/trainstep/test/internal/faultproxy"
	"github.com/trainstep/trainstep/test/internal/harnessutil"
	"github.com/trainstep/trainstep/test/internal/testenv"
	"github.com/trainstep/trainstep/test/internal/trainersim"
)

// outage is how long kube-apiserver stays down: longer than client-go's retries stay quick, and
// long enough for a step's timeout to fire inside it.
const outage = 30 * time.Second

const holdStep = "framework: jax\ntrainer: {func: \"def f(): pass\"}\n"

// cliRun is `executor run` as a pipeline's container step runs it.
type cliRun struct {
	cmd    *exec.Cmd
	stderr harnessutil.SyncBuffer
	outDir string
	code   chan int
}

func startCLI(t *testing.T, kubeconfig, ns, key, step string, extra ...string) *cliRun {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "step.yaml")
	require.NoError(t, os.WriteFile(file, []byte(step), 0o644))
	r := &cliRun{outDir: filepath.Join(dir, "out"), code: make(chan int, 1)}
	args := append([]string{"run", "-f", file, "--kubeconfig", kubeconfig, "-n", ns,
		"--step-key", key, "--owner-uid", ns, "--output-dir", r.outDir, "--no-logs"}, extra...)
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Stdout, cmd.Stderr = &r.stderr, &r.stderr
	require.NoError(t, cmd.Start())
	r.cmd = cmd
	go func() {
		err := cmd.Wait()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			r.code <- ee.ExitCode()
		case err != nil:
			r.code <- -1
		default:
			r.code <- 0
		}
	}()
	return r
}

func (r *cliRun) exit(t *testing.T) int {
	t.Helper()
	select {
	case code := <-r.code:
		return code
	case <-time.After(3 * testenv.Timeout):
		t.Fatalf("executor run did not end:\n%s", r.stderr.String())
		return -1
	}
}

// signal sends sig, as a pipeline engine does when it stops a step.
func (r *cliRun) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	require.NoError(t, r.cmd.Process.Signal(sig))
}

func (r *cliRun) output(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.outDir, name))
	require.NoError(t, err, r.stderr.String())
	return string(b)
}

// startTekton runs the Tekton face on cfg (direct, or through a fault proxy) for one namespace
// until the test ends.
func startTekton(t *testing.T, cfg *rest.Config, ns string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	stopped := startTektonUntil(ctx, t, cfg, ns)
	t.Cleanup(func() {
		cancel()
		<-stopped
	})
}

// startTektonUntil runs the Tekton face until ctx ends; the channel closes once it has stopped.
func startTektonUntil(ctx context.Context, t *testing.T, cfg *rest.Config, ns string) <-chan struct{} {
	t.Helper()
	mgr, err := tekton.New(cfg, tekton.Options{MetricsAddr: "0", ProbeAddr: "0", Namespaces: []string{ns},
		Logs: sim.Logs, Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("the Tekton controller stopped with an error: %v", err)
		}
	}()
	return stopped
}

// succeed finishes a held TrainJob successfully.
var succeed = trainersim.Behavior{Mode: trainersim.Succeed}

func customRun(t *testing.T, ns, name string) {
	t.Helper()
	run := &v1beta1.CustomRun{}
	require.NoError(t, yaml.UnmarshalStrict([]byte(`
metadata: {name: `+name+`, namespace: `+ns+`}
spec:
  customRef: {apiVersion: `+tekton.APIVersion+`, kind: `+tekton.Kind+`}
  params:
  - {name: framework, value: jax}
  - {name: trainer.func, value: "def f(): pass"}
`), run))
	run.APIVersion, run.Kind = v1beta1.GroupVersion.String(), "CustomRun"
	require.NoError(t, c.Create(t.Context(), run))
}

func runCondition(t require.TestingT, ns, name string) *v1beta1.Condition {
	run := &v1beta1.CustomRun{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, run); err != nil {
		return nil
	}
	return run.Status.Succeeded()
}

// running waits until the CLI and the CustomRun both report their TrainJob running, and
// returns the TrainJobs.
func running(t *testing.T, ns string, n int, clis ...*cliRun) []trainer.TrainJob {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		for _, r := range clis {
			assert.Contains(ct, r.stderr.String(), "Running:")
		}
		cond := runCondition(t, ns, "train")
		if assert.NotNil(ct, cond) {
			assert.Equal(ct, "Running", cond.Reason)
		}
		assert.Len(ct, testenv.TrainJobs(t.Context(), ct, env.Client, ns), n)
	}, testenv.Timeout, testenv.Interval)
	return testenv.TrainJobs(t.Context(), t, env.Client, ns)
}

func finishAll(t *testing.T, tjs []trainer.TrainJob) {
	t.Helper()
	for _, tj := range tjs {
		require.NoError(t, sim.Finish(t.Context(), tj.Namespace, tj.Name, succeed))
	}
}

// expired reports whether a watch of the namespace's TrainJobs from rv now gets 410 Gone: what
// a face cut off since rv gets when it comes back.
func expired(ctx context.Context, ns, rv string) bool {
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		return false
	}
	w, err := wc.Watch(ctx, &trainer.TrainJobList{}, client.InNamespace(ns),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
	if err != nil {
		return false
	}
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		st, ok := ev.Object.(*metav1.Status)
		return ev.Type == watch.Error && ok && st.Code == http.StatusGone
	case <-time.After(time.Second):
		return false
	}
}

// A partition that outlasts etcd's memory: the faces are cut off, both TrainJobs complete
// meanwhile and etcd compacts past what the faces saw, so their watches resume to 410 Gone. Both
// relist and report the completion; nothing is duplicated.
func TestPartitionPastCompactionLosesNoCompletion(t *testing.T) {
	ns := env.Namespace(t)
	proxy, err := faultproxy.Start(env.APIServerAddr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	cfg, kubeconfig, err := env.Via(proxy.Addr())
	require.NoError(t, err)
	startTekton(t, cfg, ns)
	cliStep := startCLI(t, kubeconfig, ns, "train", holdStep)
	customRun(t, ns, "train")
	tjs := running(t, ns, 2, cliStep)
	proxy.Cut()
	// etcd's revision now is at least anything the faces saw before the cut.
	now := &trainer.TrainJobList{}
	require.NoError(t, env.Client.List(t.Context(), now, client.InNamespace(ns)))
	seen := now.ResourceVersion
	finishAll(t, tjs)
	// etcd moves on (any write does) and compacts: a watch from what the faces saw is now gone.
	require.Eventually(t, func() bool {
		_ = env.Client.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "churn-", Namespace: ns}})
		return expired(t.Context(), ns, seen)
	}, testenv.Timeout, testenv.Interval, "etcd must compact past the faces' resource version")
	proxy.Restore()

	require.Equal(t, cli.ExitSucceeded, cliStep.exit(t), cliStep.stderr.String())
	assert.Equal(t, "Succeeded", cliStep.output(t, "phase"))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		cond := runCondition(t, ns, "train")
		if assert.NotNil(ct, cond) {
			assert.Equal(ct, corev1.ConditionTrue, cond.Status, cond.Message)
		}
	}, testenv.Timeout, testenv.Interval)
	census(t, ns, 2, 0)
}

// kube-apiserver unreachable for 30 s while every face waits (every connection dropped, every
// new one refused): the completions that follow are reported, and a step whose timeout fired
// during the outage still deletes its TrainJob once the apiserver is back (the delete is retried
// with back-off). The apiserver itself is not restarted: envtest would restart it with new
// certificates, which no real restart does; to the faces the two look the same.
func TestAPIServerOutageLosesNoCompletionAndTheTimeoutStillDeletes(t *testing.T) {
	ns := env.Namespace(t)
	proxy, err := faultproxy.Start(env.APIServerAddr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	cfg, kubeconfig, err := env.Via(proxy.Addr())
	require.NoError(t, err)
	startTekton(t, cfg, ns)
	done := startCLI(t, kubeconfig, ns, "done", holdStep)
	late := startCLI(t, kubeconfig, ns, "late", holdStep+"timeout: 20s\n")
	customRun(t, ns, "train")
	tjs := running(t, ns, 3, done, late)
	var lateJob string
	var others []trainer.TrainJob
	for _, tj := range tjs {
		if tj.Annotations["trainstep.dev/step-key"] == "late" {
			lateJob = tj.Name
		} else {
			others = append(others, tj)
		}
	}
	require.NotEmpty(t, lateJob)

	proxy.Cut()
	<-time.After(outage) // the fault itself, not a wait for something to happen
	proxy.Restore()
	finishAll(t, others)

	require.Equal(t, cli.ExitSucceeded, done.exit(t), done.stderr.String())
	require.Equal(t, cli.ExitTimedOut, late.exit(t), late.stderr.String())
	assert.Contains(t, late.output(t, "message"), "it was deleted")
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		cond := runCondition(t, ns, "train")
		if assert.NotNil(ct, cond) {
			assert.Equal(ct, corev1.ConditionTrue, cond.Status, cond.Message)
		}
	}, testenv.Timeout, testenv.Interval)
	require.Eventually(t, func() bool {
		return env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: lateJob}, &trainer.TrainJob{}) != nil
	}, testenv.Timeout, testenv.Interval, "the timed-out TrainJob must be gone")
	census(t, ns, 2, 0)
}

// census accounts for every TrainJob of the namespace: want finished ones (one per step that
// succeeded, no duplicate) and no unfinished one left behind.
func census(t *testing.T, ns string, finished, unfinished int) {
	t.Helper()
	var done, open int
	keys := map[string]int{}
	for _, tj := range testenv.TrainJobs(t.Context(), t, env.Client, ns) {
		keys[tj.Annotations["trainstep.dev/step-key"]+"/"+tj.Annotations["trainstep.dev/owner-uid"]]++
		if strings.Contains(conditionTypes(tj), "Complete") || strings.Contains(conditionTypes(tj), "Failed") {
			done++
		} else {
			open++
		}
	}
	for k, n := range keys {
		assert.Equal(t, 1, n, "duplicate TrainJobs for step %s", k)
	}
	assert.Equal(t, finished, done, "finished TrainJobs")
	assert.Equal(t, unfinished, open, "orphaned (unfinished) TrainJobs")
}

func conditionTypes(tj trainer.TrainJob) string {
	var out []string
	for _, c := range tj.Status.Conditions {
		if c.Status == metav1.ConditionTrue {
			out = append(out, c.Type)
		}
	}
	return strings.Join(out, ",")
}

func ready(url string) bool {
	resp, err := http.Get(url) //nolint:noctx // a readiness probe in a test
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// startedByArgo records what Argo's controller does when it starts a workflow, before it hands
// any node to the agent (the plugin waits for status.startedAt: it is part of a step's identity,
// so that `argo retry` gets a new TrainJob).
func startedByArgo(wf *wfv1.Workflow) {
	wf.Status.Phase = wfv1.WorkflowRunning
	wf.Status.StartedAt = metav1.NewTime(time.Now().Add(-time.Minute))
}
