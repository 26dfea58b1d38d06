package tekton_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/managed"
	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// BenchmarkTektonWorkloadCache measures what the Tekton controller's cache keeps of Kueue
// Workloads that are not trainstep's: $TRAINSTEP_BENCH_WORKLOADS (default 5000) of batch/v1
// Jobs, each with a pod template whose command carries a 20 KiB script, side by side in one run:
//   - cache=whole: the controller (tekton.Setup) on a cache that keeps Workloads as the
//     controller's did before it trimmed them: every Workload, whole but for managedFields;
//   - cache=trimmed: the controller as tekton.New builds it.
//
// Each row runs its controller in a namespace of its own, then creates the Workloads (16 at a
// time) and waits until the controller's cache holds them all. It reports heap-MB, the Go heap in
// use that their arrival added and kept (after a full collection, before and after), heap-KB per
// Workload, workload-KB (one of them as JSON) and the count.
//
// go test -run '^$' -bench '^BenchmarkTektonWorkloadCache$' -benchtime 1x ./test/integration/tekton/
func BenchmarkTektonWorkloadCache(b *testing.B) {
	n := benchInt(b, "TRAINSTEP_BENCH_WORKLOADS", foreignWorkloads)
	sample, err := json.Marshal(workload("ns", "job-other-team-00000", "uid",
		metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "other-team", UID: "uid"}))
	require.NoError(b, err)
	for _, row := range []struct {
		name  string
		start func(b *testing.B, ns string) cache.Cache
	}{
		{"whole", startWholeCacheController},
		{"trimmed", func(b *testing.B, ns string) cache.Cache { return startController(b, ns).Cache }},
	} {
		b.Run(fmt.Sprintf("workloads=%d/cache=%s", n, row.name), func(b *testing.B) {
			ns := env.Namespace(b)
			cached := row.start(b, ns)
			waitCached(b, cached, ns, 0)
			heap := cacheHeap(b, func() {
				createForeignWorkloads(b, ns, n)
				waitCached(b, cached, ns, n)
			})
			b.ReportMetric(float64(heap)/(1<<20), "heap-MB")
			b.ReportMetric(float64(heap)/float64(n)/1024, "heap-KB/workload")
			b.ReportMetric(float64(len(sample))/1024, "workload-KB")
			b.ReportMetric(float64(n), "workloads")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// startWholeCacheController runs the controller (tekton.Setup) on a manager whose cache has no
// settings of its own for Workloads: every Workload of ns, whole but for managedFields (the
// cache's default transform, as tekton.New sets it). It returns the manager's cache.
func startWholeCacheController(b *testing.B, ns string) cache.Cache {
	b.Helper()
	scheme, err := tekton.Scheme()
	require.NoError(b, err)
	mgr, err := managed.New(env.Config, scheme, cache.Options{DefaultTransform: trainjob.StripManagedFields},
		managed.Options{Name: tekton.Name, Namespaces: []string{ns}, MetricsAddr: "0", ProbeAddr: "0"})
	require.NoError(b, err)
	require.NoError(b, tekton.Setup(mgr, tekton.Options{Logs: sim.Logs, Registerer: prometheus.NewRegistry()}))
	ctx, cancel := context.WithCancel(context.WithoutCancel(b.Context()))
	var wg sync.WaitGroup
	wg.Go(func() { assert.NoError(b, mgr.Start(ctx), "the controller stopped with an error") })
	b.Cleanup(func() {
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(testenv.Timeout):
			b.Error("the controller did not stop")
		}
	})
	return mgr.GetCache()
}
