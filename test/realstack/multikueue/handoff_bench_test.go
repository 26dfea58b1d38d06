package multikueue_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
	"github.com/trainstep/trainstep/test/internal/realstack"
)

// BenchmarkMultiKueueHandoff measures the MultiKueue hand-off on the real stacks: N steps
// ($TRAINSTEP_BENCH_HANDOFF_STEPS, default 20) as CustomRuns of the Tekton face on the manager,
// each dispatched by the real Kueue to the worker and held running there; then, one step at a
// time, its pods are released and three watches time what follows:
//   - worker: the worker's TrainJob first seen terminal (its Trainer wrote it), the start of
//     both figures below;
//   - watch-p50-ms, watch-p99-ms: the manager's TrainJob first seen terminal on a bare watch
//     (Kueue's MultiKueue mirrored the status): the floor of any follower on the manager;
//   - handoff-p50-ms, handoff-p99-ms: the step's CustomRun first seen terminal (trainstep
//     noticed the mirrored status and wrote the run's end): what a pipeline waits.
//
// Nearest-rank percentiles over the N steps, both figures from the same steps in the same run.
func BenchmarkMultiKueueHandoff(b *testing.B) {
	n := 20
	if v, err := strconv.Atoi(os.Getenv("TRAINSTEP_BENCH_HANDOFF_STEPS")); err == nil && v > 0 {
		n = v
	}
	ns := manager.Namespace(b)
	q := manager.MultiKueueQueue(b, worker, ns, realstack.NodeGPUs)
	onWorker := firstTerminal(b, worker, ns, &trainer.TrainJobList{}, trainJobEnded)
	onManager := firstTerminal(b, manager, ns, &trainer.TrainJobList{}, trainJobEnded)
	runs := firstTerminal(b, manager, ns, &v1beta1.CustomRunList{}, func(o client.Object) bool {
		return o.(*v1beta1.CustomRun).Status.CompletionTime != nil
	})
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("handoff-%02d", i)
		require.NoError(b, tk.Client.Create(b.Context(), handoffRun(b, ns, names[i], q)))
	}
	jobs := map[string]string{} // CustomRun → its TrainJob (the same name on both clusters)
	require.Eventually(b, func() bool {
		l := &trainer.TrainJobList{}
		if manager.Client.List(b.Context(), l, client.InNamespace(ns)) != nil {
			return false
		}
		for _, tj := range l.Items {
			if ref := tj.Annotations[trainjob.AnnotationStepKey]; ref != "" {
				jobs[ref] = tj.Name
			}
		}
		return len(jobs) == n && runningPods(b, ns) == n
	}, 5*time.Minute, time.Second, "every step's TrainJob running on the worker")

	b.ResetTimer()
	handoff, floor := make([]time.Duration, 0, n), make([]time.Duration, 0, n)
	for _, run := range names {
		tj := jobs[run]
		require.NoError(b, worker.Release(b.Context(), ns, tj))
		tw, tm, ts := onWorker.at(b, tj), onManager.at(b, tj), runs.at(b, run)
		handoff, floor = append(handoff, ts.Sub(tw)), append(floor, tm.Sub(tw))
	}
	b.StopTimer()
	report := func(lat []time.Duration, unit string) {
		slices.Sort(lat)
		pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
		b.ReportMetric(pct(0.50), unit+"-p50-ms")
		b.ReportMetric(pct(0.99), unit+"-p99-ms")
	}
	report(handoff, "handoff")
	report(floor, "watch")
	b.ReportMetric(float64(n), "steps")
	b.ReportMetric(0, "ns/op")
}

// handoffRun is a CustomRun of the Tekton face whose step waits in queue q and holds its pod
// running on the worker until released.
func handoffRun(b *testing.B, ns, name, q string) *v1beta1.CustomRun {
	step := fmt.Sprintf(`framework: torch
queueName: %s
trainer:
  numNodes: 1
  env: {KWOK_HOLD: "1"}
  func: "def train():\n    pass\n"
timeout: 15m
`, q)
	run := &v1beta1.CustomRun{}
	require.NoError(b, yaml.UnmarshalStrict(fmt.Appendf(nil, `
metadata: {name: %s, namespace: %s}
spec:
  customRef: {apiVersion: %s, kind: %s}
  params:
  - name: step
    value: |
      %s
`, name, ns, tekton.APIVersion, tekton.Kind, strings.ReplaceAll(step, "\n", "\n      ")), run))
	return run
}

// runningPods counts the worker's Running pods in ns.
func runningPods(b *testing.B, ns string) int {
	pods := &corev1.PodList{}
	if worker.Client.List(b.Context(), pods, client.InNamespace(ns)) != nil {
		return 0
	}
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning {
			n++
		}
	}
	return n
}

func trainJobEnded(o client.Object) bool {
	c := o.(*trainer.TrainJob).Status.Conditions
	return apimeta.IsStatusConditionTrue(c, trainer.TrainJobComplete) || apimeta.IsStatusConditionTrue(c, trainer.TrainJobFailed)
}

// terminals is when a watch first saw each object of a namespace end.
type terminals struct {
	mu   sync.Mutex
	seen map[string]time.Time
	wake chan struct{}
}

// firstTerminal watches list's kind in ns on stack s, from a list so it misses nothing, until
// the benchmark ends, noting when each object is first seen ended.
func firstTerminal(b *testing.B, s *realstack.Stack, ns string, list client.ObjectList, ended func(client.Object) bool) *terminals {
	wc, err := client.NewWithWatch(s.Config, client.Options{Scheme: tk.Client.Scheme()})
	require.NoError(b, err)
	require.NoError(b, wc.List(b.Context(), list, client.InNamespace(ns)))
	w, err := wc.Watch(b.Context(), list, client.InNamespace(ns),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.GetResourceVersion()}})
	require.NoError(b, err)
	b.Cleanup(w.Stop)
	t := &terminals{seen: map[string]time.Time{}, wake: make(chan struct{})}
	go func() {
		for ev := range w.ResultChan() {
			o, ok := ev.Object.(client.Object)
			if !ok || ev.Type == watch.Deleted || ev.Type == watch.Error || !ended(o) {
				continue
			}
			now := time.Now()
			t.mu.Lock()
			if _, dup := t.seen[o.GetName()]; !dup {
				t.seen[o.GetName()] = now
				close(t.wake)
				t.wake = make(chan struct{})
			}
			t.mu.Unlock()
		}
	}()
	return t
}

// at waits (a minute at most) for name to be seen ended and says when it was.
func (t *terminals) at(b *testing.B, name string) time.Time {
	ctx, cancel := context.WithTimeout(b.Context(), time.Minute)
	defer cancel()
	for {
		t.mu.Lock()
		at, ok := t.seen[name]
		wake := t.wake
		t.mu.Unlock()
		if ok {
			return at
		}
		select {
		case <-wake:
		case <-ctx.Done():
			b.Fatalf("%s was not seen ended within a minute", name)
		}
	}
}
