package core_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/require"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
)

// BenchmarkNotice measures the time from the TrainJob's terminal condition being written to the
// wait returning: trainstep's watch against a poll loop (the SDK's wait_for_job_status polls; 1 s
// is kinder than its 2 s default). Compare with: benchstat -col /wait bench.out
func BenchmarkNotice(b *testing.B) {
	for _, impl := range []string{"watch", "poll-1s"} {
		b.Run("wait="+impl, func(b *testing.B) {
			ns := env.Namespace(b)
			p := benchPlan(b, ns)
			var lat []time.Duration
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				id := trainjob.Identity{Engine: "bench", OwnerUID: ns, StepKey: fmt.Sprintf("s%d", i)}
				tj, _, err := trainjob.Submit(b.Context(), env.Client, p.TrainJob(id), id)
				require.NoError(b, err)
				ready := make(chan struct{})
				done := make(chan time.Time, 1)
				go func() {
					var err error
					if impl == "watch" {
						var once bool
						_, err = waiter().Wait(b.Context(), ns, tj.Name, trainjob.WaitOptions{OnChange: func(trainjob.Observation) {
							if !once {
								once = true
								close(ready)
							}
						}})
					} else {
						close(ready)
						err = pollUntilTerminal(b, ns, tj.Name, time.Second)
					}
					if err != nil {
						b.Error(err)
					}
					done <- time.Now()
				}()
				<-ready
				b.StartTimer()
				t0 := time.Now()
				complete(b, tj)
				lat = append(lat, (<-done).Sub(t0))
			}
			b.StopTimer()
			report(b, lat)
		})
	}
}

func pollUntilTerminal(b *testing.B, ns, name string, every time.Duration) error {
	return wait.PollUntilContextCancel(b.Context(), every, false, func(ctx context.Context) (bool, error) {
		cur := &trainer.TrainJob{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cur); err != nil {
			return false, err
		}
		return trainjob.Observe(cur, nil).Phase.Terminal(), nil
	})
}

func complete(b *testing.B, tj *trainer.TrainJob) {
	cur := &trainer.TrainJob{}
	require.NoError(b, env.Client.Get(b.Context(), client.ObjectKeyFromObject(tj), cur))
	apimeta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "AllJobsCompleted", Message: "jobset completed successfully"})
	require.NoError(b, env.Client.Status().Update(b.Context(), cur))
}

func report(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[(len(lat)*99)/100]), "p99-ms")
}

func benchPlan(b *testing.B, ns string) *trainjob.Plan {
	s := parse(b, "framework: jax\nlabels: {sim-mode: hold}\ntrainer: {func: \"def f(): pass\"}")
	p, err := planner().Plan(b.Context(), s, ns)
	require.NoError(b, err)
	return p
}

// BenchmarkSubmit compares trainstep's create-or-get with a bare client create of the same
// TrainJob, and a replayed submit (the job exists: one read, no write).
// Compare with: benchstat -col /submit bench.out
func BenchmarkSubmit(b *testing.B) {
	for _, impl := range []string{"raw-create", "trainstep", "trainstep-replay"} {
		b.Run("submit="+impl, func(b *testing.B) {
			ns := env.Namespace(b)
			p := benchPlan(b, ns)
			replay := trainjob.Identity{Engine: "bench", OwnerUID: ns, StepKey: "replay"}
			if impl == "trainstep-replay" {
				_, _, err := trainjob.Submit(b.Context(), env.Client, p.TrainJob(replay), replay)
				require.NoError(b, err)
			}
			b.ResetTimer()
			for i := range b.N {
				id := trainjob.Identity{Engine: "bench", OwnerUID: ns, StepKey: fmt.Sprintf("s%d", i)}
				var err error
				switch impl {
				case "raw-create":
					err = env.Client.Create(b.Context(), p.TrainJob(id))
				case "trainstep":
					_, _, err = trainjob.Submit(b.Context(), env.Client, p.TrainJob(id), id)
				case "trainstep-replay":
					_, _, err = trainjob.Submit(b.Context(), env.Client, p.TrainJob(replay), replay)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
