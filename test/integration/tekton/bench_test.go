package tekton_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
	"github.com/trainstep/trainstep/test/internal/harnessutil"
)

// benchUser is who the benchmark's controller authenticates as (in system:masters): the
// apiserver audits this user's requests and no one else's (TestMain).
const benchUser = "trainstep-bench-controller"

// benchRuns is how many CustomRuns BenchmarkConcurrentRuns holds live at once:
// $TRAINSTEP_BENCH_RUNS (run with -benchtime 1x), else b.N (-benchtime 10000x does the same
// after a first round of 1).
func benchRuns(b *testing.B) int {
	v := os.Getenv("TRAINSTEP_BENCH_RUNS")
	if v == "" {
		return b.N
	}
	n, err := strconv.Atoi(v)
	require.NoError(b, err, "TRAINSTEP_BENCH_RUNS")
	require.Positive(b, n, "TRAINSTEP_BENCH_RUNS")
	return n
}

// benchInt reads a tuning knob of the benchmark from the environment.
func benchInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(b, err, name)
	require.Positive(b, n, name)
	return n
}

// BenchmarkConcurrentRuns runs the real `executor tekton-controller` binary (so its RSS is the
// controller's alone) against N CustomRuns held running at once — their TrainJobs held by the
// Trainer simulator, one Running pod each — then completes the TrainJobs one after another
// (TRAINSTEP_BENCH_COMPLETERS at a time, default 1) and reports:
//   - notice-p50-ms / notice-p99-ms: TrainJob Complete condition written (from before the
//     status write is sent) → CustomRun terminal seen through a watch;
//   - rss-MB and heap-MB (heap in use, garbage included) with every run live, live-heap-MB
//     (after a collection: what the controller holds) then, and peak-rss-MB (VmHWM) at the end,
//     of the controller process;
//   - api-requests/run: every request of the controller's client (rest_client_requests_total)
//     from its start to every run finished, startup lists and watches included, divided by N;
//   - runs: N.
//
// The log breaks the requests down by verb, resource and response code, from the apiserver's
// audit log of the controller's user.
//
// 10,000 live runs: TRAINSTEP_BENCH_RUNS=10000 go test -run '^$' -bench '^BenchmarkConcurrentRuns$'
// -benchtime 1x -timeout 30m ./test/integration/tekton/
func BenchmarkConcurrentRuns(b *testing.B) {
	concurrentRuns(b, benchRuns(b), benchInt(b, "TRAINSTEP_BENCH_COMPLETERS", 1))
}

// concurrentRuns is BenchmarkConcurrentRuns with n runs, completed completers at a time.
func concurrentRuns(b *testing.B, n, completers int) {
	ns := env.Namespace(b)
	bin := filepath.Join(b.TempDir(), "executor")
	build := exec.CommandContext(b.Context(), "go", "build", "-o", bin, "../../../cmd/executor")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	require.NoError(b, build.Run())
	kubeconfig, err := env.UserKubeconfig(benchUser, "system:masters")
	require.NoError(b, err)
	auditFrom := fileSize(b, auditLog)
	metricsAddr, pprofAddr := harnessutil.FreeAddr(b), harnessutil.FreeAddr(b)
	// The default 50 QPS would make the start of 10,000 runs (a create and two status writes
	// each) take 10 minutes; a controller sized for that many runs is given a budget to match.
	cmd := exec.CommandContext(b.Context(), bin, "tekton-controller", "--kubeconfig", kubeconfig,
		"--namespaces", ns, "--metrics-bind-address", metricsAddr, "--health-probe-bind-address", "0", "--pprof-bind-address", pprofAddr,
		"--kube-api-qps", strconv.Itoa(benchInt(b, "TRAINSTEP_BENCH_QPS", 500)), "--kube-api-burst", "1000")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr harnessutil.SyncBuffer
	cmd.Stderr = &stderr
	require.NoError(b, cmd.Start())
	b.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })

	runs := trackRuns(b, ns, n)
	start := time.Now()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("run-%05d", i)
	}
	parallel(b, names, 16, func(name string) error {
		return c.Create(b.Context(), jaxRun(b, ns, name, "hold", "timeout: 0s"))
	})
	b.Logf("%d CustomRuns created in %s", n, time.Since(start).Round(time.Millisecond))
	select {
	case <-runs.allRunning:
	case <-time.After(2*time.Minute + time.Duration(n)*50*time.Millisecond):
		b.Fatalf("only %d of %d CustomRuns reached Running; controller log:\n%s", runs.countRunning(), n, tail(stderr.String(), 4000))
	}
	b.Logf("%d CustomRuns running after %s", n, time.Since(start).Round(time.Millisecond))
	rss := procStatusKB(b, cmd.Process.Pid, "VmRSS")
	heap := scrape(b, metricsAddr, "go_memstats_heap_inuse_bytes")
	live, err := harnessutil.LiveHeapBytes(b.Context(), pprofAddr)
	require.NoError(b, err)

	jobs := trainJobsByRun(b, ns)
	b.ResetTimer()
	finish := time.Now()
	lat := completeAll(b, names, jobs, runs, completers)
	b.StopTimer()
	b.Logf("%d CustomRuns finished in %s, %d at a time", n, time.Since(finish).Round(time.Millisecond), completers)
	requests := scrapeSum(b, metricsAddr, "rest_client_requests_total")
	reportNotice(b, lat)
	b.ReportMetric(float64(rss)/1024, "rss-MB")
	b.ReportMetric(heap/(1<<20), "heap-MB")
	b.ReportMetric(float64(live)/(1<<20), "live-heap-MB")
	b.ReportMetric(float64(procStatusKB(b, cmd.Process.Pid, "VmHWM"))/1024, "peak-rss-MB")
	b.ReportMetric(requests/float64(n), "api-requests/run")
	b.ReportMetric(float64(n), "runs")
	b.ReportMetric(0, "ns/op")
	logRequests(b, auditLog, auditFrom, n)
}

// completeAll writes the Complete condition to each run's TrainJob (jobs, by run), completers at
// a time, and returns for each run (by its index in names) the time from before that status
// write to the run first seen terminal.
func completeAll(b *testing.B, names []string, jobs map[string]*trainer.TrainJob, runs *runTracker, completers int) []time.Duration {
	lat := make([]time.Duration, len(names))
	index := make(map[string]int, len(names))
	for i, name := range names {
		index[name] = i
	}
	parallel(b, names, completers, func(name string) error {
		tj := jobs[name]
		if tj == nil {
			return fmt.Errorf("no TrainJob for CustomRun %s", name)
		}
		var t0 time.Time
		for {
			t0 = time.Now()
			apimeta.SetStatusCondition(&tj.Status.Conditions, metav1.Condition{Type: trainer.TrainJobComplete,
				Status: metav1.ConditionTrue, Reason: "AllJobsCompleted", Message: "jobset completed successfully"})
			err := c.Status().Update(b.Context(), tj)
			if !apierrors.IsConflict(err) {
				if err != nil {
					return err
				}
				break
			}
			if err := c.Get(b.Context(), client.ObjectKeyFromObject(tj), tj); err != nil {
				return err
			}
		}
		select {
		case t1 := <-runs.terminal(name):
			lat[index[name]] = t1.Sub(t0)
		case <-time.After(30 * time.Second):
			return fmt.Errorf("CustomRun %s was not finished within 30s of its TrainJob", name)
		}
		return nil
	})
	return lat
}

// reportNotice reports the notice latencies' nearest-rank p50 and p99.
func reportNotice(b *testing.B, lat []time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), "notice-p50-ms")
	b.ReportMetric(pct(0.99), "notice-p99-ms")
}

// parallel calls f for each name, at most k at once, and fails the test on the first error.
func parallel(b testing.TB, names []string, k int, f func(name string) error) {
	sem := make(chan struct{}, k)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, name := range names {
		sem <- struct{}{}
		mu.Lock()
		failed := len(errs) > 0
		mu.Unlock()
		if failed {
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := f(name); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.NoError(b, errors.Join(errs...))
}

// runTracker follows every CustomRun of a namespace through one watch: when all n have been
// Running, and when each turned terminal.
type runTracker struct {
	n          int
	allRunning chan struct{}

	mu       sync.Mutex
	running  map[string]bool
	finished map[string]chan time.Time
}

func (r *runTracker) countRunning() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.running)
}

// terminal yields the time the run was first seen terminal.
func (r *runTracker) terminal(name string) chan time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.finished[name] == nil {
		r.finished[name] = make(chan time.Time, 1)
	}
	return r.finished[name]
}

func (r *runTracker) observe(run *v1beta1.CustomRun) {
	cond := run.Status.Succeeded()
	switch {
	case cond == nil:
	case run.Status.CompletionTime != nil:
		select {
		case r.terminal(run.Name) <- time.Now():
		default:
		}
	case cond.Status == corev1.ConditionUnknown && cond.Reason == "Running":
		r.mu.Lock()
		if !r.running[run.Name] {
			r.running[run.Name] = true
			if len(r.running) == r.n {
				close(r.allRunning)
			}
		}
		r.mu.Unlock()
	}
}

// trackRuns watches the namespace's CustomRuns until the benchmark ends, picking the watch up
// again where it stopped if the apiserver closes it.
func trackRuns(b *testing.B, ns string, n int) *runTracker {
	r := &runTracker{n: n, allRunning: make(chan struct{}), running: map[string]bool{}, finished: map[string]chan time.Time{}}
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: c.Scheme()})
	require.NoError(b, err)
	ctx := b.Context()
	open := func(rv string) (watch.Interface, error) {
		return wc.Watch(ctx, &v1beta1.CustomRunList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
	}
	w, err := open("")
	require.NoError(b, err)
	go func() {
		rv := ""
		for {
			for ev := range w.ResultChan() {
				run, ok := ev.Object.(*v1beta1.CustomRun)
				if !ok || ev.Type == watch.Deleted {
					continue
				}
				rv = run.ResourceVersion
				r.observe(run)
			}
			if ctx.Err() != nil {
				return
			}
			if w, err = open(rv); err != nil {
				return // the benchmark then times out waiting, naming the runs it missed
			}
		}
	}()
	b.Cleanup(func() { w.Stop() })
	return r
}

// trainJobsByRun maps each CustomRun to its TrainJob, by the controller owner reference, read
// in pages.
func trainJobsByRun(b *testing.B, ns string) map[string]*trainer.TrainJob {
	out := map[string]*trainer.TrainJob{}
	opts := []client.ListOption{client.InNamespace(ns), client.Limit(500)}
	for {
		l := &trainer.TrainJobList{}
		require.NoError(b, c.List(b.Context(), l, opts...))
		for i := range l.Items {
			if ref := metav1.GetControllerOf(&l.Items[i]); ref != nil {
				out[ref.Name] = &l.Items[i]
			}
		}
		if l.Continue == "" {
			return out
		}
		opts = []client.ListOption{client.InNamespace(ns), client.Limit(500), client.Continue(l.Continue)}
	}
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

// scrapeSum adds up every series of a metric on the controller's /metrics.
func scrapeSum(b *testing.B, addr, metric string) float64 {
	res, err := http.Get("http://" + addr + "/metrics")
	require.NoError(b, err)
	defer res.Body.Close()
	sum, found := 0.0, false
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, metric+"{") || strings.HasPrefix(line, metric+" ") {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			require.NoError(b, err)
			sum, found = sum+v, true
		}
	}
	require.NoError(b, sc.Err())
	require.True(b, found, "no %s on the controller's /metrics", metric)
	return sum
}

func scrape(b *testing.B, addr, metric string) float64 { return scrapeSum(b, addr, metric) }

func fileSize(b *testing.B, path string) int64 {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	require.NoError(b, err)
	return fi.Size()
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// auditEvent is what the benchmark reads of an audit.k8s.io/v1 Event.
type auditEvent struct {
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// requestCounts counts the benchUser requests in the audit log from offset on, each once,
// by "verb resource[/subresource]", with the response code when it is not a success.
func requestCounts(path string, offset int64) (map[string]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening the audit log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, fmt.Errorf("seeking in the audit log: %w", err)
	}
	counts := map[string]int{}
	seen := map[string]bool{}
	dec := json.NewDecoder(bufio.NewReaderSize(f, 1<<20))
	for {
		var e auditEvent
		if err := dec.Decode(&e); errors.Is(err, io.EOF) {
			return counts, nil
		} else if err != nil {
			return nil, fmt.Errorf("reading the audit log: %w", err)
		}
		if e.User.Username != benchUser || seen[e.AuditID] {
			continue
		}
		seen[e.AuditID] = true // a watch is logged when it starts and again when it ends
		key := e.Verb + " " + strings.SplitN(e.RequestURI, "?", 2)[0]
		if e.ObjectRef != nil && e.ObjectRef.Resource != "" {
			key = e.Verb + " " + e.ObjectRef.Resource
			if e.ObjectRef.Subresource != "" {
				key += "/" + e.ObjectRef.Subresource
			}
		}
		if e.ResponseStatus != nil && (e.ResponseStatus.Code < 200 || e.ResponseStatus.Code > 299) {
			key += " → " + strconv.Itoa(e.ResponseStatus.Code)
		}
		counts[key]++
	}
}

// logRequests prints the controller's requests by verb and resource, most frequent first.
func logRequests(b *testing.B, path string, offset int64, runs int) {
	counts, err := requestCounts(path, offset)
	require.NoError(b, err)
	keys := make([]string, 0, len(counts))
	total := 0
	for k, v := range counts {
		keys = append(keys, k)
		total += v
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var sb strings.Builder
	fmt.Fprintf(&sb, "the controller's requests, as the apiserver audited them (%d, %.3f per run):\n", total, float64(total)/float64(runs))
	for _, k := range keys {
		fmt.Fprintf(&sb, "  %8d  %7.3f/run  %s\n", counts[k], float64(counts[k])/float64(runs), k)
	}
	// On stdout, not b.Log: a benchmark's log is cut to its first lines.
	fmt.Print(sb.String())
}
