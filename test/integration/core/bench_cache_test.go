package core_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/core/lifecycle"
	"github.com/trainstep/trainstep/core/stepcache"
	"github.com/trainstep/trainstep/core/trainjob"
)

// BenchmarkCacheHit measures a step's first look on the engine every face runs, against the real
// apiserver, reading TrainJobs from an indexed informer cache as the faces do: a step with a cache block whose key has a stored success (a hit: plan, key, one
// ConfigMap read, nothing created) beside the same step without the block (plan, then create its
// TrainJob), alternated per iteration so load drift hits both alike; and, apart, planning the step
// alone, which both do first. Reports hit-p50-ms, hit-p99-ms, submit-p50-ms, submit-p99-ms and
// plan-p50-ms.
func BenchmarkCacheHit(b *testing.B) {
	ns := env.Namespace(b)
	plain, cached := parse(b, benchStep), parse(b, benchStep+"cache: {maxAge: 1h}\n")
	// The faces' path: TrainJobs read from an informer cache with trainstep's identity index.
	e := &lifecycle.Engine{Cluster: lifecycle.Cluster{Cache: trainJobInformers(b, ns), Indexed: true, API: env.Client, Writer: env.Client},
		Planner: planner()}

	p, err := e.Planner.Plan(b.Context(), cached, ns)
	require.NoError(b, err)
	key, err := stepcache.Key(p, "")
	require.NoError(b, err)
	require.NoError(b, stepcache.Store{API: env.Client, Writer: env.Client}.Put(b.Context(), ns, stepcache.Entry{Key: key,
		TrainJob: "trained-earlier", Outputs: map[string]string{trainjob.OutPhase: "Succeeded"}, Stored: time.Now()}))

	b.ResetTimer()
	var hits, submits, plans []time.Duration
	for i := range b.N {
		t0 := time.Now()
		_, err := e.Planner.Plan(b.Context(), plain, ns)
		plans = append(plans, time.Since(t0))
		require.NoError(b, err)
		for k := range 2 {
			hit := (i+k)%2 == 0
			s := lifecycle.Step{Spec: plain, Namespace: ns,
				Identity: trainjob.Identity{Engine: "bench", OwnerUID: ns, StepKey: fmt.Sprintf("cache-%d-%d", i, k)}}
			if hit {
				s.Spec = cached
			}
			t0 := time.Now()
			st := e.Look(b.Context(), s)
			took := time.Since(t0)
			require.NoError(b, st.Err)
			if hit {
				require.NotNil(b, st.Cached, st.Message)
				hits = append(hits, took)
			} else {
				require.True(b, st.Created, st.Message)
				submits = append(submits, took)
			}
		}
	}
	b.StopTimer()
	h50, h99 := percentiles(hits)
	s50, s99 := percentiles(submits)
	b.ReportMetric(ms(h50), "hit-p50-ms")
	b.ReportMetric(ms(h99), "hit-p99-ms")
	b.ReportMetric(ms(s50), "submit-p50-ms")
	b.ReportMetric(ms(s99), "submit-p99-ms")
	p50, _ := percentiles(plans)
	b.ReportMetric(ms(p50), "plan-p50-ms")
}
