package argo_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/core/runtimes"
	corestep "github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainers"
	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/argoharness"
	"github.com/trainstep/trainstep/test/internal/harnessutil"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// BenchmarkSidecarRSS runs the real `executor argo-plugin --workflow wf-x` binary, as Argo runs
// it in an agent pod, in an empty namespace and in one holding N TrainJobs of other workflows
// (4 KB of function source each) and 2N JobSet pods whose command carries that source, as the
// Trainer's do. It reports the process's RSS and Go heap once its cache has synced, and how
// many TrainJobs the cache holds; "unscoped" is the same sidecar without --workflow.
func BenchmarkSidecarRSS(b *testing.B) {
	bin := shippedBinary(b)
	n := benchCount("TRAINSTEP_BENCH_JOBS", 1000) // other workflows' TrainJobs, 2 JobSet pods each
	empty := env.Namespace(b)
	busy := env.Namespace(b)
	for _, ns := range []string{empty, busy} {
		wf := &wfv1.Workflow{}
		wf.Namespace, wf.Name = ns, "wf-x"
		wf.Spec.Entrypoint = "main"
		wf.Spec.Templates = []wfv1.Template{{Name: "main", Suspend: &wfv1.SuspendTemplate{}}}
		require.NoError(b, c.Create(b.Context(), wf))
	}
	t0 := time.Now()
	fill(b, busy, n)
	b.Logf("%d TrainJobs and %d pods of other workflows created in %s", n, 2*n, time.Since(t0).Round(time.Millisecond))
	for _, tc := range []struct {
		name, ns string
		scoped   bool
	}{
		{"jobs=0/scoped", empty, true},
		{fmt.Sprintf("jobs=%d/scoped", n), busy, true},
		{fmt.Sprintf("jobs=%d/unscoped", n), busy, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var rss, anon, heap float64
			var f footprint
			for range b.N {
				f = sidecarFootprint(b, bin, tc.ns, tc.scoped)
				rss, anon, heap = rss+f.rss, anon+f.anon, heap+f.heap
			}
			b.ReportMetric(rss/float64(b.N), "rss-MB")
			b.ReportMetric(anon/float64(b.N), "anon-MB")
			b.ReportMetric(heap/float64(b.N), "heap-MB")
			b.ReportMetric(f.trainJobs, "cached-trainjobs")
			b.ReportMetric(f.pods, "cached-pods")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// footprint is what BenchmarkSidecarRSS reads of one sidecar.
type footprint struct {
	rss, anon, heap float64 // MiB
	trainJobs, pods float64 // objects in its cache
}

// sidecarFootprint starts the sidecar, waits for its cache to sync and to settle, and reads its
// RSS, its Go heap in use and the TrainJobs and pods its cache holds.
func sidecarFootprint(b *testing.B, bin, ns string, scoped bool) footprint {
	dir := b.TempDir()
	token := filepath.Join(dir, "token")
	require.NoError(b, os.WriteFile(token, []byte(uuid.NewString()), 0o440))
	addr, metricsAddr := harnessutil.FreeAddr(b), harnessutil.FreeAddr(b)
	args := []string{"argo-plugin", "--kubeconfig", env.Kubeconfig, "--namespace", ns, "--addr", addr, "--metrics-addr", metricsAddr, "--token-file", token}
	if scoped {
		args = append(args, "--workflow", "wf-x")
	}
	cmd := exec.CommandContext(b.Context(), bin, args...)
	cmd.Env = append(os.Environ(), "ARGO_WORKFLOW_NAME=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(b, cmd.Start())
	defer func() { _ = cmd.Process.Signal(syscall.SIGKILL); _ = cmd.Wait() }()
	h := &harness{URL: "http://" + addr, Metrics: "http://" + metricsAddr}
	require.Eventually(b, func() bool {
		res, err := httpGet(h.URL + "/readyz")
		return err == nil && res == "ok"
	}, testenv.Timeout, testenv.Interval, "the sidecar must become ready: %s", &stderr)
	// Let the first lists' garbage go: a sidecar lives for its workflow's whole run.
	time.Sleep(3 * time.Second) //nolint:forbidigo // a settling time before a reading, not a synchronisation
	var f footprint
	var err error
	f.rss, _, err = argoharness.RSSMB(cmd.Process.Pid)
	require.NoError(b, err)
	f.anon, err = anonMB(cmd.Process.Pid)
	require.NoError(b, err)
	heapBytes, err := strconv.ParseFloat(metric(b, h, "go_memstats_heap_inuse_bytes"), 64)
	require.NoError(b, err)
	f.heap = heapBytes / (1 << 20)
	f.trainJobs, err = strconv.ParseFloat(metric(b, h, "trainstep_argo_cached_trainjobs"), 64)
	require.NoError(b, err)
	f.pods, err = strconv.ParseFloat(metric(b, h, "trainstep_argo_cached_pods"), 64)
	require.NoError(b, err)
	return f
}

// fill creates n TrainJobs of 10 other workflows, each with 4 KB of function source, and two
// JobSet node pods per TrainJob carrying the rendered command, as the Trainer's pods do.
func fill(b *testing.B, ns string, n int) {
	var src strings.Builder
	src.WriteString("def train():\n")
	for i := 0; src.Len() < 4<<10; i++ {
		fmt.Fprintf(&src, "    x_%04d = %d  # a line of the user's training function, padding to 4 KB\n", i, i)
	}
	y := fmt.Sprintf("framework: xgboost\nlabels: {%s: no-resources}\ntrainer:\n  numNodes: 2\n  func: |\n%s",
		SimMode, indent(src.String(), "    "))
	spec, err := corestep.Parse([]byte(y))
	require.NoError(b, err)
	plan, err := (&trainjob.Planner{Trainers: trainers.Builtin(), Runtimes: runtimes.ClusterSource{Reader: c}}).Plan(b.Context(), spec, ns)
	require.NoError(b, err)
	owners := make([]string, 10)
	for i := range owners {
		owners[i] = uuid.NewString()
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			id := trainjob.Identity{Engine: "argo", OwnerUID: owners[i%len(owners)], StepKey: fmt.Sprintf("wf-%d.train-%d", i%len(owners), i)}
			tj := plan.TrainJob(id)
			if err := c.Create(b.Context(), tj); err != nil {
				b.Errorf("creating TrainJob %d: %v", i, err)
				return
			}
			cmd := tj.Spec.Trainer.Command
			for node := range 2 {
				// JobSet's labels, and trainstep's from the pod template (spec.runtimePatches).
				podLabels := trainjob.PodLabels(id)
				podLabels[trainjob.LabelJobSetName] = tj.Name
				podLabels[trainjob.LabelReplicatedJob] = trainjob.NodeJob
				podLabels[trainjob.LabelCompletionIndex] = strconv.Itoa(node)
				p := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{
						Namespace: ns, Name: fmt.Sprintf("%s-node-0-%d-%s", tj.Name, node, uuid.NewString()[:5]),
						Labels: podLabels,
					},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name: trainjob.NodeContainer, Image: "ghcr.io/kubeflow/trainer/xgboost-runtime:v2.3.0", Command: cmd,
						Env: []corev1.EnvVar{{Name: "DMLC_NUM_WORKER", Value: "2"}, {Name: "DMLC_TASK_ID", Value: strconv.Itoa(node)}},
					}}},
				}
				if err := c.Create(b.Context(), p); err != nil {
					b.Errorf("creating pod of TrainJob %d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	require.False(b, b.Failed())
}

// anonMB is a process's private resident memory (RssAnon): its heap, stacks and runtime, without
// the pages of its binary, which the kernel maps from the file and shares between processes.
func anonMB(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			var kb float64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%f kB", &kb); err != nil {
				return 0, fmt.Errorf("reading RssAnon of %d: %w", pid, err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("no RssAnon in /proc/%d/status", pid)
}

func indent(s, by string) string {
	return by + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+by) + "\n"
}

// httpGet is get for polling: a refused connection is an error, not a failure.
func httpGet(url string) (string, error) {
	res, err := http.Get(url) //nolint:noctx // a poll with its own deadline
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return string(body), err
}
