package argo_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/require"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/argo"
	"github.com/trainstep/trainstep/test/internal/argoharness"
	"github.com/trainstep/trainstep/test/internal/argotest"
	"github.com/trainstep/trainstep/test/internal/harnessutil"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// BenchmarkCompletionNotice: from the write that makes a TrainJob terminal to the held call's
// terminal reply. Run with -benchtime 200x for p50/p99 over 200 jobs.
func BenchmarkCompletionNotice(b *testing.B) {
	ns := env.Namespace(b)
	creator := startPlugin(b, ns, func(o *argo.Options) { o.HoldMax = 0 })
	holder := startPlugin(b, ns, func(o *argo.Options) { o.HoldMax = 20 * time.Second; o.MaxHeld = 16 })
	wf := workflow(b, ns)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		args, err := argotest.Args(wf.Name, ns, string(wf.UID), step(fmt.Sprintf("train-%d", i), "hold"))
		require.NoError(b, err)
		r, err := argotest.Execute(b.Context(), creator.URL, creator.Token, args)
		require.NoError(b, err)
		require.NotNil(b, r.Node, "body: %s", r.Body)
		name, _ := r.Output(trainjob.OutName)
		got := argotest.ExecuteAsync(b.Context(), holder.URL, holder.Token, args)
		require.Eventually(b, func() bool { return metric(b, holder, "trainstep_argo_held_calls") == "1" }, testenv.Timeout, time.Millisecond)
		b.StartTimer()
		start := complete(b, ns, name)
		a := <-got
		b.StopTimer()
		require.NoError(b, a.Err)
		require.NotNil(b, a.Reply.Node)
		require.Equal(b, wfv1.NodeSucceeded, a.Reply.Node.Phase, a.Reply.Node.Message)
		lat = append(lat, a.At.Sub(start))
		b.StartTimer()
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}

// complete makes the TrainJob terminal as the Trainer would, again on a conflict (the plugin
// records a job's start beside its calls), and returns when the write that took began.
func complete(tb testing.TB, ns, name string) time.Time {
	tb.Helper()
	var start time.Time
	require.NoError(tb, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		tj := &trainer.TrainJob{}
		if err := c.Get(tb.Context(), client.ObjectKey{Namespace: ns, Name: name}, tj); err != nil {
			return err
		}
		apimeta.SetStatusCondition(&tj.Status.Conditions, metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "AllJobsCompleted", Message: "done"})
		start = time.Now()
		return c.Status().Update(tb.Context(), tj)
	}))
	return start
}

// statusClients is how many status calls BenchmarkStatusCalls keeps in flight: Argo's agent
// calls plugins from ARGO_AGENT_TASK_WORKERS task workers (16 by default), each one call at a
// time, so 16 is the most a sidecar sees at once.
const statusClients = 16

// BenchmarkStatusCalls: status calls (not held) on tracked TrainJobs with 1,000 tracked, from
// statusClients clients at once sharing one http.Client that keeps a connection per client (see
// statusCalls for why not the agent's two). The request
// bodies are encoded once up front: encoding is the agent's cost, not the plugin's. Each server is
// measured two ways:
//
//   - load=flat-out: every client calls again as soon as its call returns: the most calls/s the
//     server answers. Its latency is mostly queueing (statusClients calls in flight on 2 cores).
//   - load=2000-per-s: calls due at 2,000 a second, open loop (the throughput floor),
//     each call's latency from when it was due rather than from when a client got to it, so a
//     stall shows in the tail instead of slowing the load (no coordinated omission).
//
// Both report calls/s and the per-call latency the client sees (call-p50-ms, call-p99-ms).
//
//   - plugin=sidecar: the real `executor argo-plugin --workflow` process, as in an agent pod (it
//     logs every call, as in production): the figure. handler-p50-ms and handler-p99-ms are the
//     sidecar's own account of the same calls (the duration it logs: token check to reply
//     rendered); its RSS after the calls is sidecar-rss-MB.
//   - plugin=canned-reply: the floor. cannedserver, a process that answers every call with the
//     bytes of one of the sidecar's replies and does nothing else, under the same clients and
//     load: what an HTTP call between two processes costs on this machine, which the sidecar's
//     figure carries too.
//   - plugin=in-process: the plugin in this process, on a client that counts its requests:
//     api-requests/call (none: every answer comes from the informer cache), and the handler
//     path under -cpuprofile (the setup's creates are outside the timer but not outside the
//     profile: focus on executeHandler). Its latency tail also carries this process's collector
//     (the simulator, the apiserver clients, the bodies), which the sidecar's does not.
func BenchmarkStatusCalls(b *testing.B) {
	var reply []byte // one of the sidecar's replies, for the floor
	b.Run("plugin=sidecar", func(b *testing.B) {
		bin := filepath.Join(b.TempDir(), "executor")
		build := exec.CommandContext(b.Context(), "go", "build", "-o", bin, "../../../cmd/executor")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		require.NoError(b, build.Run())
		ns := env.Namespace(b)
		s := &sidecar{wf: workflow(b, ns)}
		ports, err := harnessutil.FreePorts(2)
		require.NoError(b, err)
		require.NoError(b, s.start(b, bin, ns, ports[0], ports[1], "--hold-max", "0"))
		b.Cleanup(s.stop)
		bodies := trackJobs(b, s.h, s.wf)
		r, err := argotest.Call(b.Context(), s.h.URL, s.h.Token, bodies[0])
		require.NoError(b, err)
		require.NotNil(b, r.Node, "body: %s", r.Body)
		reply = r.Body
		statusLoads(b, s.h, bodies, nil, func(b *testing.B, run func()) {
			logged := len(s.log.String())
			run()
			var handler []time.Duration
			// The log reaches this process through a pipe, a moment after the replies.
			require.Eventually(b, func() bool {
				handler = loggedDurations(b, s.log.String()[logged:])
				return len(handler) >= b.N
			}, testenv.Timeout, testenv.Interval, "the sidecar logs one execute line per call")
			require.Len(b, handler, b.N, "the sidecar logs one execute line per call")
			p50, p99 := latencies(handler)
			b.ReportMetric(p50, "handler-p50-ms")
			b.ReportMetric(p99, "handler-p99-ms")
			rss, _, err := argoharness.RSSMB(s.cmd.Process.Pid)
			require.NoError(b, err)
			b.ReportMetric(rss, "sidecar-rss-MB")
		})
	})
	b.Run("plugin=canned-reply", func(b *testing.B) {
		require.NotEmpty(b, reply, "the floor answers with a reply of the sidecar's: run plugin=sidecar first (-bench 'BenchmarkStatusCalls/plugin=(sidecar|canned-reply)')")
		dir := b.TempDir()
		bin, replyFile := filepath.Join(dir, "cannedserver"), filepath.Join(dir, "reply.json")
		build := exec.CommandContext(b.Context(), "go", "build", "-o", bin, "./cannedserver")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		require.NoError(b, build.Run())
		require.NoError(b, os.WriteFile(replyFile, reply, 0o600))
		ports, err := harnessutil.FreePorts(1)
		require.NoError(b, err)
		addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
		cmd := exec.CommandContext(context.WithoutCancel(b.Context()), bin, "--addr", addr, "--reply", replyFile)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		out, err := cmd.StdoutPipe()
		require.NoError(b, err)
		cmd.Stderr = os.Stderr
		require.NoError(b, cmd.Start())
		b.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
		line, err := bufio.NewReader(out).ReadString('\n')
		require.NoError(b, err, "cannedserver did not start")
		require.Equal(b, "ready\n", line)
		// The request bodies matter only for their size: the floor reads them and answers the same.
		body, err := json.Marshal(map[string]string{"pad": strings.Repeat("x", 4096)})
		require.NoError(b, err)
		statusLoads(b, &harness{URL: "http://" + addr}, [][]byte{body}, nil, nil)
	})
	b.Run("plugin=in-process", func(b *testing.B) {
		ns := env.Namespace(b)
		var requests atomic.Int64
		h := startPluginWith(b, countingConfig(&requests), ns, func(o *argo.Options) { o.HoldMax = 0 })
		bodies := trackJobs(b, h, workflow(b, ns))
		statusLoads(b, h, bodies, &requests, nil)
	})
}

// loggedDurations returns the duration of every execute line in the sidecar's log.
func loggedDurations(b *testing.B, log string) []time.Duration {
	var ds []time.Duration
	for line := range strings.Lines(log) {
		var e struct {
			Msg      string `json:"msg"`
			Duration string `json:"duration"`
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Msg != "execute" {
			continue
		}
		d, err := time.ParseDuration(e.Duration)
		require.NoError(b, err, "an execute line's duration: %s", line)
		ds = append(ds, d)
	}
	return ds
}

// statusRate is the pace of load=2000-per-s: the floor for a sidecar's status calls.
const statusRate = 2000

// trackJobs tracks 1,000 TrainJobs of wf on the plugin h and returns a status call's body for each.
func trackJobs(b *testing.B, h *harness, wf *wfv1.Workflow) [][]byte {
	const jobs = 1000
	ns := wf.Namespace
	bodies := make([][]byte, jobs)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range jobs {
		args, err := argotest.Args(wf.Name, ns, string(wf.UID), step(fmt.Sprintf("train-%d", i), "hold"))
		require.NoError(b, err)
		bodies[i], err = json.Marshal(args)
		require.NoError(b, err)
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			r, err := argotest.Execute(b.Context(), h.URL, h.Token, args)
			if err == nil && r.Node != nil {
				if name, _ := r.Output(trainjob.OutName); name != "" {
					return
				}
			}
			b.Errorf("creating job %d: %v %s", i, err, r.Body)
		})
	}
	wg.Wait()
	require.Eventually(b, func() bool {
		return metric(b, h, "trainstep_argo_cached_trainjobs") == strconv.Itoa(jobs)
	}, testenv.Timeout, testenv.Interval, "the plugin's cache must hold every TrainJob")
	return bodies
}

// statusLoads runs load=flat-out and load=2000-per-s on the plugin h; requests, when not nil,
// counts the plugin's API requests; around, when not nil, runs each measurement (run), measuring
// around it.
func statusLoads(b *testing.B, h *harness, bodies [][]byte, requests *atomic.Int64, around func(b *testing.B, run func())) {
	for _, rate := range []int{0, statusRate} {
		name := "load=flat-out"
		if rate > 0 {
			name = fmt.Sprintf("load=%d-per-s", rate)
		}
		b.Run(name, func(b *testing.B) {
			run := func() { statusCalls(b, h, bodies, rate, requests) }
			if around == nil {
				run()
				return
			}
			around(b, run)
		})
	}
}

// statusCalls times b.N status calls from statusClients clients, flat out when rate is 0, else
// due at rate a second with each latency counted from its call's due time.
func statusCalls(b *testing.B, h *harness, bodies [][]byte, rate int, requests *atomic.Int64) {
	var before int64
	if requests != nil {
		before = requests.Load()
	}
	// One kept-alive connection per client. The agent's plugin client keeps Go's default of two
	// idle connections per host, so beyond two calls in flight it dials anew; at thousands of
	// calls a second that fills the loopback's ephemeral ports with TIME_WAIT sockets within
	// seconds, and the figure would measure the kernel's port search (the floor's p99 rose
	// tenfold as they filled), not the plugin.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = statusClients
	defer transport.CloseIdleConnections()
	hc := &http.Client{Timeout: 30 * time.Second, Transport: transport}
	lat := make([][]time.Duration, statusClients)
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var clients sync.WaitGroup
	for w := range statusClients {
		clients.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), 1))
			mine := make([]time.Duration, 0, b.N/statusClients+1)
			for i := next.Add(1) - 1; i < int64(b.N); i = next.Add(1) - 1 {
				t0 := time.Now()
				if rate > 0 {
					// Pacing, not synchronisation: the load generator holds the call until it is due.
					t0 = start.Add(time.Duration(i) * time.Second / time.Duration(rate))
					time.Sleep(time.Until(t0))
				}
				r, err := argotest.CallWith(b.Context(), hc, h.URL, h.Token, bodies[rnd.IntN(len(bodies))])
				mine = append(mine, time.Since(t0))
				if err != nil || r.Node == nil || r.Node.Phase == wfv1.NodeFailed {
					b.Errorf("status call: %v %s", err, r.Body)
					return
				}
			}
			lat[w] = mine
		})
	}
	clients.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	p50, p99 := latencies(all)
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "calls/s")
	b.ReportMetric(p50, "call-p50-ms")
	b.ReportMetric(p99, "call-p99-ms")
	if requests != nil {
		b.ReportMetric(float64(requests.Load()-before)/float64(len(all)), "api-requests/call")
	}
}
