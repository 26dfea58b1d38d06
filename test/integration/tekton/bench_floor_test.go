package tekton_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/require"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
)

// BenchmarkTektonNotice puts the Tekton face's notice beside its floor, N runs each way
// ($TRAINSTEP_BENCH_NOTICE_RUNS, default 200), one after the other in one run on one apiserver,
// each TrainJob completed one at a time and timed the same way (completeAll: the Complete
// condition's write → the CustomRun first seen terminal on the benchmark's watch):
//   - way=trainstep: the real `executor tekton-controller` (BenchmarkConcurrentRuns with N runs);
//   - way=watch+status-write: the least any custom task controller can do, one bare watch of
//     the namespace's TrainJobs and, when one turns Complete, one status write (a merge patch)
//     to its CustomRun: no cache, no reconcile queue, no outputs, no pod or Event reads.
func BenchmarkTektonNotice(b *testing.B) {
	n := benchInt(b, "TRAINSTEP_BENCH_NOTICE_RUNS", 200)
	b.Run("way=trainstep", func(b *testing.B) { concurrentRuns(b, n, 1) })
	b.Run("way=watch+status-write", func(b *testing.B) { floorRuns(b, n) })
}

// floorRuns holds n CustomRuns Running, each with a TrainJob the simulator leaves alone (its
// no-resources mode), ends them through floorController and reports the notice as
// BenchmarkConcurrentRuns does.
func floorRuns(b *testing.B, n int) {
	ns := env.Namespace(b)
	runs := trackRuns(b, ns, n)
	names := make([]string, n)
	jobs := make(map[string]*trainer.TrainJob, n)
	for i := range names {
		names[i] = fmt.Sprintf("run-%05d", i)
	}
	parallel(b, names, 16, func(name string) error {
		run := jaxRun(b, ns, name, "no-resources")
		if err := c.Create(b.Context(), run); err != nil {
			return err
		}
		tj := &trainer.TrainJob{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{SimMode: "no-resources"}},
			Spec:       trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "jax-distributed"}},
		}
		if err := c.Create(b.Context(), tj); err != nil {
			return err
		}
		// Running, as a controller says it once it created the job.
		return c.Status().Patch(b.Context(), run, client.RawPatch(types.MergePatchType,
			fmt.Appendf(nil, `{"status":{"startTime":%q,"conditions":[{"type":"Succeeded","status":"Unknown","reason":"Running"}]}}`,
				time.Now().UTC().Format(time.RFC3339))))
	})
	for _, name := range names {
		tj := &trainer.TrainJob{}
		require.NoError(b, c.Get(b.Context(), client.ObjectKey{Namespace: ns, Name: name}, tj))
		jobs[name] = tj
	}
	select {
	case <-runs.allRunning:
	case <-time.After(time.Minute):
		b.Fatalf("only %d of %d CustomRuns Running", runs.countRunning(), n)
	}
	floorController(b, ns)
	b.ResetTimer()
	lat := completeAll(b, names, jobs, runs, 1)
	b.StopTimer()
	reportNotice(b, lat)
	b.ReportMetric(float64(n), "runs")
	b.ReportMetric(0, "ns/op")
}

// floorController is the floor of a custom task controller: one bare watch of ns's TrainJobs,
// opened from a list so it misses nothing, and one status write per TrainJob that turns Complete.
// It runs until the benchmark ends.
func floorController(b *testing.B, ns string) {
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: c.Scheme()})
	require.NoError(b, err)
	l := &trainer.TrainJobList{}
	require.NoError(b, wc.List(b.Context(), l, client.InNamespace(ns)))
	w, err := wc.Watch(b.Context(), &trainer.TrainJobList{}, client.InNamespace(ns),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: l.ResourceVersion}})
	require.NoError(b, err)
	b.Cleanup(w.Stop)
	go func() {
		done := map[string]bool{}
		for ev := range w.ResultChan() {
			tj, ok := ev.Object.(*trainer.TrainJob)
			if !ok || ev.Type == watch.Deleted || done[tj.Name] || !apimeta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete) {
				continue
			}
			done[tj.Name] = true
			run := &v1beta1.CustomRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tj.Name}}
			patch := fmt.Appendf(nil, `{"status":{"completionTime":%q,"conditions":[{"type":"Succeeded","status":"True","reason":"Succeeded"}]}}`,
				time.Now().UTC().Format(time.RFC3339))
			ctx, cancel := context.WithTimeout(b.Context(), 10*time.Second)
			if err := wc.Status().Patch(ctx, run, client.RawPatch(types.MergePatchType, patch)); err != nil && b.Context().Err() == nil {
				b.Errorf("the floor's status write to CustomRun %s: %v", tj.Name, err)
			}
			cancel()
		}
	}()
}
