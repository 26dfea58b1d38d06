package tekton_test

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
	"github.com/trainstep/trainstep/test/internal/harnessutil"
)

// BenchmarkConcurrentRuns runs the real `executor tekton-controller` binary against b.N
// CustomRuns held running at once (make bench-tekton uses -benchtime 1000x), then completes
// their TrainJobs one after another, and reports:
//   - notice-p50-ms / notice-p99-ms: TrainJob Complete condition written → CustomRun terminal
//     seen through a watch (from before the status write is sent, so it includes that write);
//   - rss-MB (all runs active) and peak-rss-MB (VmHWM) of the controller process;
//   - api-requests/run: the controller's own client requests (rest_client_requests_total)
//     from start to every run finished, divided by b.N.
func BenchmarkConcurrentRuns(b *testing.B) {
	ns := env.Namespace(b)
	bin := filepath.Join(b.TempDir(), "executor")
	build := exec.CommandContext(b.Context(), "go", "build", "-o", bin, "../../../cmd/executor")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	require.NoError(b, build.Run())
	metricsAddr := harnessutil.FreeAddr(b)
	cmd := exec.CommandContext(b.Context(), bin, "tekton-controller", "--kubeconfig", env.Kubeconfig,
		"--namespaces", ns, "--metrics-bind-address", metricsAddr, "--health-probe-bind-address", "0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(b, cmd.Start())
	b.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })

	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: c.Scheme()})
	require.NoError(b, err)
	w, err := wc.Watch(b.Context(), &v1beta1.CustomRunList{}, client.InNamespace(ns))
	require.NoError(b, err)
	defer w.Stop()
	n := b.N
	var mu sync.Mutex
	running := map[string]bool{}
	allRunning := make(chan struct{})
	terminal := map[string]chan time.Time{}
	seen := func(name string) chan time.Time {
		mu.Lock()
		defer mu.Unlock()
		if terminal[name] == nil {
			terminal[name] = make(chan time.Time, 1)
		}
		return terminal[name]
	}
	go func() {
		for ev := range w.ResultChan() {
			run, ok := ev.Object.(*v1beta1.CustomRun)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			cond := run.Status.Succeeded()
			switch {
			case cond == nil:
			case cond.Status == corev1.ConditionUnknown && cond.Reason == "Running":
				mu.Lock()
				if !running[run.Name] {
					running[run.Name] = true
					if len(running) == n {
						close(allRunning)
					}
				}
				mu.Unlock()
			case run.Status.CompletionTime != nil:
				select {
				case seen(run.Name) <- time.Now():
				default:
				}
			}
		}
	}()

	start := time.Now()
	names := make([]string, n)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range n {
		names[i] = fmt.Sprintf("run-%04d", i)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			create(b, jaxRun(b, ns, names[i], "hold", "timeout: 0s"))
		}()
	}
	wg.Wait()
	select {
	case <-allRunning:
	case <-time.After(time.Duration(n)*50*time.Millisecond + 2*time.Minute):
		mu.Lock()
		defer mu.Unlock()
		b.Fatalf("only %d of %d CustomRuns reached Running", len(running), n)
	}
	b.Logf("%d CustomRuns running after %s", n, time.Since(start).Round(time.Millisecond))
	rss := procStatusKB(b, cmd.Process.Pid, "VmRSS")

	jobs := trainJobsByRun(b, ns)
	b.ResetTimer()
	lat := make([]time.Duration, 0, n)
	for _, name := range names {
		tj := jobs[name]
		require.NotNil(b, tj, "no TrainJob for CustomRun %s", name)
		t0 := time.Now()
		apimeta.SetStatusCondition(&tj.Status.Conditions, metav1.Condition{Type: trainer.TrainJobComplete,
			Status: metav1.ConditionTrue, Reason: "AllJobsCompleted", Message: "jobset completed successfully"})
		require.NoError(b, c.Status().Update(b.Context(), tj))
		select {
		case t1 := <-seen(name):
			lat = append(lat, t1.Sub(t0))
		case <-time.After(30 * time.Second):
			b.Fatalf("CustomRun %s was not finished within 30s of its TrainJob", name)
		}
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), "notice-p50-ms")
	b.ReportMetric(pct(0.99), "notice-p99-ms")
	b.ReportMetric(float64(rss)/1024, "rss-MB")
	b.ReportMetric(float64(procStatusKB(b, cmd.Process.Pid, "VmHWM"))/1024, "peak-rss-MB")
	b.ReportMetric(apiRequests(b, metricsAddr)/float64(n), "api-requests/run")
	b.ReportMetric(0, "ns/op")
}

// trainJobsByRun maps each CustomRun to its TrainJob, by the controller owner reference.
func trainJobsByRun(b *testing.B, ns string) map[string]*trainer.TrainJob {
	l := &trainer.TrainJobList{}
	require.NoError(b, c.List(b.Context(), l, client.InNamespace(ns)))
	out := map[string]*trainer.TrainJob{}
	for i := range l.Items {
		if ref := metav1.GetControllerOf(&l.Items[i]); ref != nil {
			out[ref.Name] = &l.Items[i]
		}
	}
	return out
}

func procStatusKB(b *testing.B, pid int, field string) int {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(b, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && k == field {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			require.NoError(b, err)
			return kb
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

func apiRequests(b *testing.B, addr string) float64 {
	res, err := http.Get("http://" + addr + "/metrics")
	require.NoError(b, err)
	defer res.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "rest_client_requests_total{") {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			require.NoError(b, err)
			sum += v
		}
	}
	return sum
}
