package argo_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/require"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// complete makes the TrainJob terminal as the Trainer would and returns when the write began.
func complete(tb testing.TB, ns, name string) time.Time {
	tb.Helper()
	tj := &trainer.TrainJob{}
	require.NoError(tb, c.Get(tb.Context(), client.ObjectKey{Namespace: ns, Name: name}, tj))
	apimeta.SetStatusCondition(&tj.Status.Conditions, metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "AllJobsCompleted", Message: "done"})
	start := time.Now()
	require.NoError(tb, c.Status().Update(tb.Context(), tj))
	return start
}

// statusClients is how many status calls BenchmarkStatusCalls keeps in flight: Argo's agent
// calls plugins from ARGO_AGENT_TASK_WORKERS task workers (16 by default), each one call at a
// time, so 16 is the most a sidecar sees at once.
const statusClients = 16

// BenchmarkStatusCalls: status calls (not held) on tracked TrainJobs with 1,000 tracked, from
// statusClients clients at once sharing one http.Client on the default transport, as the agent's
// plugin client does (so most calls beyond the two kept-alive connections dial anew). The request
// bodies are encoded once up front: encoding is the agent's cost, not the plugin's. Reports
// calls/s and the per-call latency (call-p50-ms, call-p99-ms).
//
//   - plugin=sidecar: the real `executor argo-plugin --workflow` process, as in an agent pod (it
//     logs every call, as in production): the figure. Its heap and collector are its own; its
//     RSS after the calls is sidecar-rss-MB.
//   - plugin=in-process: the plugin in this process, on a client that counts its requests:
//     api-requests/call (none: every answer comes from the informer cache), and the handler
//     path under -cpuprofile (the setup's creates are outside the timer but not outside the
//     profile: focus on executeHandler). Its latency tail also carries this process's collector
//     (the simulator, the apiserver clients, the bodies), which the sidecar's does not.
func BenchmarkStatusCalls(b *testing.B) {
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
		statusCalls(b, s.h, s.wf, nil)
		rss, _, err := argoharness.RSSMB(s.cmd.Process.Pid)
		require.NoError(b, err)
		b.ReportMetric(rss, "sidecar-rss-MB")
	})
	b.Run("plugin=in-process", func(b *testing.B) {
		ns := env.Namespace(b)
		var requests atomic.Int64
		h := startPluginWith(b, countingConfig(&requests), ns, func(o *argo.Options) { o.HoldMax = 0 })
		statusCalls(b, h, workflow(b, ns), &requests)
	})
}

// statusCalls tracks 1,000 TrainJobs on the plugin h, then times b.N status calls about them.
// requests, when not nil, counts the plugin's API requests.
func statusCalls(b *testing.B, h *harness, wf *wfv1.Workflow, requests *atomic.Int64) {
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
	var before int64
	if requests != nil {
		before = requests.Load()
	}
	lat := make([][]time.Duration, statusClients)
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var clients sync.WaitGroup
	for w := range statusClients {
		clients.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), 1))
			mine := make([]time.Duration, 0, b.N/statusClients+1)
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				r, err := argotest.Call(b.Context(), h.URL, h.Token, bodies[rnd.IntN(jobs)])
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
	slices.Sort(all)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "calls/s")
	b.ReportMetric(ms(all[len(all)/2]), "call-p50-ms")
	b.ReportMetric(ms(all[(len(all)*99)/100]), "call-p99-ms")
	if requests != nil {
		b.ReportMetric(float64(requests.Load()-before)/float64(len(all)), "api-requests/call")
	}
}
