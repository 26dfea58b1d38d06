package argo_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/pkg/plugins/executor"
	"github.com/google/uuid"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/argoharness"
	"github.com/trainstep/trainstep/test/internal/argotest"
	"github.com/trainstep/trainstep/test/internal/harnessutil"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// benchCount is a benchmark's size: $env when it is a positive number, else def.
func benchCount(env string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(env)); err == nil && n > 0 {
		return n
	}
	return def
}

// shippedBinary builds the executor as `make build` builds the binary the image ships (static, no
// symbol table), for the benchmarks that measure its memory.
func shippedBinary(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "executor")
	build := exec.CommandContext(b.Context(), "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "../../../cmd/executor")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	require.NoError(b, build.Run())
	return bin
}

// BenchmarkSidecarFleet runs N workflows at once against one apiserver, as Argo does: one agent
// pod per workflow, so one real `executor argo-plugin --workflow wf-i` process each (its own
// port, token and metrics port), all in one namespace. Each sidecar gets one trainstep step,
// called as the agent calls it: the first call creates the TrainJob (held by the simulator) and
// is held; a hold that runs out (--hold-max) is answered Running and called again at once. With
// every step held it reads each sidecar's RSS and the apiserver's open watches, then completes the
// TrainJobs one after another, each while its call is held, and times each from the terminal
// write to the terminal reply. Reports sidecars, rss-MB-sum, rss-MB/sidecar, apiserver-watches
// (the fleet's: open watches with the fleet up, minus before it started), notice-p50-ms and
// notice-p99-ms. Run with -benchtime 1x: one iteration is the whole fleet.
func BenchmarkSidecarFleet(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "executor")
	build := exec.CommandContext(b.Context(), "go", "build", "-o", bin, "../../../cmd/executor")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	require.NoError(b, build.Run())
	kube, err := kubernetes.NewForConfig(env.Config)
	require.NoError(b, err)
	n := benchCount("TRAINSTEP_BENCH_SIDECARS", 100) // workflows at once
	var rss, watches float64
	var lat []time.Duration
	for range b.N {
		r, w, l := runFleet(b, bin, kube, n)
		rss, watches = rss+r, watches+w
		lat = append(lat, l...)
	}
	p50, p99 := latencies(lat)
	b.ReportMetric(float64(n), "sidecars")
	b.ReportMetric(rss/float64(b.N), "rss-MB-sum")
	b.ReportMetric(rss/float64(b.N)/float64(n), "rss-MB/sidecar")
	b.ReportMetric(watches/float64(b.N), "apiserver-watches")
	b.ReportMetric(p50, "notice-p50-ms")
	b.ReportMetric(p99, "notice-p99-ms")
	b.ReportMetric(0, "ns/op")
}

// sidecar is one running plugin process of the fleet and its step.
type sidecar struct {
	h     *harness
	cmd   *exec.Cmd
	wf    *wfv1.Workflow
	log   *harnessutil.SyncBuffer
	index int
	job   string               // the step's TrainJob
	done  chan argotest.Answer // the step's terminal reply
}

// runFleet starts n sidecars, holds one step on each, reads the footprint and times the notices.
func runFleet(b *testing.B, bin string, kube kubernetes.Interface, n int) (rssSum, watches float64, lat []time.Duration) {
	ns := env.Namespace(b)
	before, err := apiserverWatches(b.Context(), kube)
	require.NoError(b, err)
	ports, err := harnessutil.FreePorts(2 * n)
	require.NoError(b, err)
	fleet := make([]*sidecar, n)
	for i := range fleet {
		wf := &wfv1.Workflow{}
		wf.Namespace, wf.Name = ns, fmt.Sprintf("wf-%d", i)
		wf.Spec.Entrypoint = "main"
		wf.Spec.Templates = []wfv1.Template{{Name: "main", Suspend: &wfv1.SuspendTemplate{}}}
		wf.Status.Phase = wfv1.WorkflowRunning
		wf.Status.StartedAt = metav1.NewTime(time.Now().Add(-time.Minute))
		require.NoError(b, c.Create(b.Context(), wf))
		fleet[i] = &sidecar{wf: wf, index: i, done: make(chan argotest.Answer, 1)}
	}
	// One cleanup for the fleet: every sidecar is told to stop at once, as the agent pods of
	// finished workflows are, then waited for.
	b.Cleanup(func() {
		for _, s := range fleet {
			if s.cmd != nil && s.cmd.Process != nil {
				_ = s.cmd.Process.Signal(syscall.SIGTERM)
			}
		}
		for _, s := range fleet {
			if s.cmd != nil && s.cmd.Process != nil {
				_ = s.cmd.Wait()
			}
		}
	})
	// Start them a few at a time: each lists its caches on start, as an agent pod does.
	forEach(b, fleet, 8, func(s *sidecar) error {
		// The longest hold the agent's 30 s timeout allows: the fleet is completed one step at a time.
		return s.start(b, bin, ns, ports[2*s.index], ports[2*s.index+1], "--hold-max", "25s")
	})
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	for _, s := range fleet {
		args, err := argotest.Args(s.wf.Name, ns, string(s.wf.UID), step("train", "hold"))
		require.NoError(b, err)
		go s.call(ctx, args)
	}
	for _, s := range fleet {
		require.Eventually(b, func() bool { return s.held(b) }, testenv.Timeout, testenv.Interval, "the step of %s must be held: %s", s.wf.Name, s.log)
		owner := trainjob.Identity{OwnerUID: string(s.wf.UID)}.Labels()[trainjob.LabelOwnerUID]
		l := &trainer.TrainJobList{}
		require.NoError(b, c.List(b.Context(), l, client.InNamespace(ns), client.MatchingLabels{trainjob.LabelOwnerUID: owner}))
		require.Len(b, l.Items, 1, "the TrainJob of %s", s.wf.Name)
		s.job = l.Items[0].Name
	}
	// Every step is held: the fleet as it stands while its workflows train.
	for _, s := range fleet {
		r, _, err := argoharness.RSSMB(s.cmd.Process.Pid)
		require.NoError(b, err)
		rssSum += r
	}
	after, err := apiserverWatches(b.Context(), kube)
	require.NoError(b, err)
	b.Logf("%d sidecars: RSS %.0f MB in all; apiserver watches %.0f → %.0f", n, rssSum, before, after)
	for _, s := range fleet {
		// A hold that ran out is called again at once: complete the job while a call is held.
		require.Eventually(b, func() bool { return s.held(b) }, testenv.Timeout, time.Millisecond, "the step of %s must be held", s.wf.Name)
		start := complete(b, ns, s.job)
		a := <-s.done
		require.NoError(b, a.Err)
		require.NotNil(b, a.Reply.Node, "body: %s", a.Reply.Body)
		require.Equal(b, wfv1.NodeSucceeded, a.Reply.Node.Phase, "%s: %s", s.wf.Name, a.Reply.Node.Message)
		lat = append(lat, a.At.Sub(start))
	}
	return rssSum, after - before, lat
}

// call calls the step as the agent does until its reply is terminal (a hold that runs out is
// answered Running and called again, here at once), and delivers that reply.
func (s *sidecar) call(ctx context.Context, args executor.ExecuteTemplateArgs) {
	for ctx.Err() == nil {
		r, err := argotest.Execute(ctx, s.h.URL, s.h.Token, args)
		a := argotest.Answer{Reply: r, Err: err, At: time.Now()}
		if err != nil || r.Node == nil || r.Requeue == nil {
			s.done <- a
			return
		}
		if r.Node.Phase == wfv1.NodePending {
			// Not held (trouble that may pass): wait the requeue, as the agent does.
			t := time.NewTimer(r.Requeue.Duration)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
	}
}

func (s *sidecar) held(b *testing.B) bool {
	return metric(b, s.h, "trainstep_argo_held_calls") == "1"
}

// start runs the sidecar as the agent pod would and waits until it is ready.
func (s *sidecar) start(b *testing.B, bin, ns string, port, metricsPort int, extra ...string) error {
	dir := b.TempDir()
	token := uuid.NewString()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o440); err != nil {
		return err
	}
	addr, metricsAddr := fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("127.0.0.1:%d", metricsPort)
	args := append([]string{"argo-plugin", "--kubeconfig", env.Kubeconfig, "--namespace", ns, "--workflow", s.wf.Name,
		"--addr", addr, "--metrics-addr", metricsAddr, "--token-file", tokenFile}, extra...)
	s.cmd = exec.CommandContext(context.WithoutCancel(b.Context()), bin, args...)
	s.cmd.Env = append(os.Environ(), "ARGO_WORKFLOW_NAME=")
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	s.log = &harnessutil.SyncBuffer{}
	s.cmd.Stderr = s.log
	if err := s.cmd.Start(); err != nil {
		return err
	}
	s.h = &harness{URL: "http://" + addr, Metrics: "http://" + metricsAddr, Token: token, TokenFile: tokenFile, Namespace: ns}
	err := wait.PollUntilContextTimeout(b.Context(), testenv.Interval, testenv.Timeout, true, func(context.Context) (bool, error) {
		res, err := httpGet(s.h.URL + "/readyz")
		return err == nil && res == "ok", nil
	})
	if err != nil {
		return fmt.Errorf("sidecar %s not ready: %w: %s", s.wf.Name, err, s.log)
	}
	return nil
}

// stop ends the sidecar as Argo ends an agent pod (SIGTERM) and waits for it.
func (s *sidecar) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		_ = s.cmd.Wait()
	}
}

// forEach runs f on every sidecar, at most par at once, and fails the benchmark on any error.
func forEach(b *testing.B, fleet []*sidecar, par int, f func(*sidecar) error) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, par)
	errs := make([]error, len(fleet))
	for i, s := range fleet {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = f(s)
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(b, err)
	}
}

// apiserverWatches is the apiserver's open watch requests now: the WATCH series of its
// apiserver_longrunning_requests gauge, summed.
func apiserverWatches(ctx context.Context, kube kubernetes.Interface) (float64, error) {
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the apiserver's metrics: %w", err)
	}
	var sum float64
	found := false
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_longrunning_requests{") || !strings.Contains(line, `verb="WATCH"`) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("reading %q: %w", line, err)
		}
		sum += v
		found = true
	}
	if !found {
		return 0, fmt.Errorf("the apiserver reports no apiserver_longrunning_requests WATCH series")
	}
	return sum, nil
}

// latencies are the p50 and p99 of lat, in milliseconds.
func latencies(lat []time.Duration) (p50, p99 float64) {
	if len(lat) == 0 {
		return 0, 0
	}
	slices.Sort(lat)
	return float64(lat[len(lat)/2].Microseconds()) / 1000, float64(lat[(len(lat)*99)/100].Microseconds()) / 1000
}
