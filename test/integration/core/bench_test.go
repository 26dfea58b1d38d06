package core_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/lifecycle"
	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// BenchmarkNotice measures the time from the TrainJob's terminal condition being written to the
// wait returning.
//
//   - wait=watch-vs-bare: trainstep's Waiter against the floor, a bare watch on the same TrainJob
//     (the Waiter's client, a field selector on its name, started before the write), on the same
//     apiserver in the same run. Each iteration follows two fresh TrainJobs, one each way, and
//     alternates which goes first, so load drift hits both alike; each follower starts once the
//     simulator has made the job's pods (settled), so its reconcile is in neither's window. Reports watch-p50-ms,
//     watch-p99-ms, bare-p50-ms, bare-p99-ms and ratio-p50 (watch ÷ bare).
//   - wait=poll-1s: a poll loop (the SDK's wait_for_job_status polls; 1 s is kinder than its 2 s
//     default): p50-ms, p99-ms.
func BenchmarkNotice(b *testing.B) {
	b.Run("wait=watch-vs-bare", func(b *testing.B) {
		ns := env.Namespace(b)
		p := benchPlan(b, ns)
		var watched, bare []time.Duration
		b.ResetTimer()
		for i := range b.N {
			for k := range 2 {
				impl := (i + k) % 2 // 0: the Waiter, 1: the bare watch; alternating which goes first
				b.StopTimer()
				id := trainjob.Identity{Engine: "bench", OwnerUID: ns, StepKey: fmt.Sprintf("s%d-%d", i, impl)}
				tj, _, err := trainjob.Submit(b.Context(), env.Client, p.TrainJob(id), id)
				require.NoError(b, err)
				settled(b, tj)
				var follow func() (time.Time, error)
				if impl == 0 {
					follow = waitFollower(b, ns, p.Spec, id)
				} else {
					follow = bareFollower(b, ns, tj.Name)
				}
				b.StartTimer()
				t0 := time.Now()
				complete(b, tj)
				at, err := follow()
				require.NoError(b, err)
				if impl == 0 {
					watched = append(watched, at.Sub(t0))
				} else {
					bare = append(bare, at.Sub(t0))
				}
			}
		}
		b.StopTimer()
		w50, w99 := percentiles(watched)
		b50, b99 := percentiles(bare)
		b.ReportMetric(ms(w50), "watch-p50-ms")
		b.ReportMetric(ms(w99), "watch-p99-ms")
		b.ReportMetric(ms(b50), "bare-p50-ms")
		b.ReportMetric(ms(b99), "bare-p99-ms")
		b.ReportMetric(float64(w50)/float64(b50), "ratio-p50")
	})
	b.Run("wait=poll-1s", func(b *testing.B) {
		ns := env.Namespace(b)
		p := benchPlan(b, ns)
		var lat []time.Duration
		b.ResetTimer()
		for i := range b.N {
			b.StopTimer()
			id := trainjob.Identity{Engine: "bench", OwnerUID: ns, StepKey: fmt.Sprintf("s%d", i)}
			tj, _, err := trainjob.Submit(b.Context(), env.Client, p.TrainJob(id), id)
			require.NoError(b, err)
			done := make(chan time.Time, 1)
			go func() {
				if err := pollUntilTerminal(b, ns, tj.Name, time.Second); err != nil {
					b.Error(err)
				}
				done <- time.Now()
			}()
			b.StartTimer()
			t0 := time.Now()
			complete(b, tj)
			lat = append(lat, (<-done).Sub(t0))
		}
		b.StopTimer()
		report(b, lat)
	})
}

// settled returns once the simulator has made the new TrainJob's pods: its reconcile (a runtime
// lookup, pod creates) must not overlap a measured write, and the Waiter, which follows pods,
// must not be timed while they arrive.
func settled(b *testing.B, tj *trainer.TrainJob) {
	require.Eventually(b, func() bool {
		pods := &corev1.PodList{}
		return env.Client.List(b.Context(), pods, client.InNamespace(tj.Namespace), client.MatchingLabels{trainjob.LabelJobSetName: tj.Name}) == nil &&
			len(pods.Items) > 0
	}, testenv.Timeout, time.Millisecond, "the simulator must make the pods of %s", tj.Name)
}

// waitFollower runs the step of identity id with the core's lifecycle, as `executor run` does,
// and returns once it follows its TrainJob (its first status); the function returned gives when
// the run returned.
func waitFollower(b *testing.B, ns string, spec *step.Spec, id trainjob.Identity) func() (time.Time, error) {
	ready := make(chan struct{})
	done := make(chan error, 1)
	var at time.Time
	go func() {
		var once bool
		_, err := runner().Run(b.Context(), lifecycle.Step{Spec: spec, Namespace: ns, Identity: id}, lifecycle.RunOptions{OnChange: func(lifecycle.Status) {
			if !once {
				once = true
				close(ready)
			}
		}})
		at = time.Now()
		done <- err
	}()
	select {
	case <-ready:
	case err := <-done:
		return func() (time.Time, error) { return at, fmt.Errorf("the wait ended before the job did: %w", err) }
	}
	return func() (time.Time, error) {
		err := <-done
		return at, err
	}
}

// bareFollower is the floor: a plain watch on the one TrainJob from the version a list of it
// returned (what kubectl wait does), open before the write; the function returned gives when the terminal event arrived.
func bareFollower(b *testing.B, ns, name string) func() (time.Time, error) {
	ctx, cancel := context.WithCancel(b.Context())
	// As kubectl wait and the Waiter do: read the object, then watch from its version.
	sel := client.MatchingFields{"metadata.name": name}
	l := &trainer.TrainJobList{}
	err := wc.List(ctx, l, client.InNamespace(ns), sel)
	var w watch.Interface
	if err == nil {
		w, err = wc.Watch(ctx, &trainer.TrainJobList{}, client.InNamespace(ns), sel, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: l.ResourceVersion}})
	}
	if err != nil {
		cancel()
		return func() (time.Time, error) { return time.Time{}, err }
	}
	return func() (time.Time, error) {
		defer cancel()
		defer w.Stop()
		for ev := range w.ResultChan() {
			if tj, ok := ev.Object.(*trainer.TrainJob); ok && trainjob.Observe(tj, nil).Phase.Terminal() {
				return time.Now(), nil
			}
		}
		return time.Time{}, fmt.Errorf("the watch on TrainJob %s/%s ended before the job did", ns, name)
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
	p50, p99 := percentiles(lat)
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p99), "p99-ms")
}

// percentiles sorts lat and returns its p50 and p99.
func percentiles(lat []time.Duration) (p50, p99 time.Duration) {
	if len(lat) == 0 {
		return 0, 0
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[(len(lat)*99)/100]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// benchStep is the step the benchmarks submit: one the simulator holds running.
const benchStep = "framework: jax\nlabels: {sim-mode: hold}\ntrainer: {func: \"def f(): pass\"}\n"

func benchPlan(b *testing.B, ns string) *trainjob.Plan {
	p, err := planner().Plan(b.Context(), parse(b, benchStep), ns)
	require.NoError(b, err)
	return p
}

// trainJobInformers is the faces' TrainJob cache for namespace ns, synced, with trainstep's
// identity index; it stops with the benchmark.
func trainJobInformers(b *testing.B, ns string) cache.Cache {
	b.Helper()
	informers, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	require.NoError(b, err)
	require.NoError(b, trainjob.RegisterIndexes(b.Context(), informers))
	ctx, stop := context.WithCancel(b.Context())
	b.Cleanup(stop)
	_, err = informers.GetInformer(ctx, &trainer.TrainJob{})
	require.NoError(b, err)
	go func() { _ = informers.Start(ctx) }()
	require.True(b, informers.WaitForCacheSync(ctx))
	return informers
}

// BenchmarkSubmit measures trainjob.Submit on the path the long-running faces use: reads from an
// informer cache (falling back to the apiserver for an object the cache has not seen, as the Argo
// plugin's reader does), writes through the client.
//
//   - submit=new-vs-bare: a new TrainJob each way per iteration, Submit and a bare create of the
//     same object on the same client, alternating which goes first. Reports submit-us and
//     bare-us (p50), ratio (Submit ÷ bare, p50) and api-requests/op (Submit's own).
//   - submit=replay: Submit of a job that exists (a replayed call): api-requests/op.
func BenchmarkSubmit(b *testing.B) {
	ns := env.Namespace(b)
	p := benchPlan(b, ns)
	var requests atomic.Int64
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			requests.Add(1)
			return rt.RoundTrip(r)
		})
	})
	api, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	require.NoError(b, err)
	informers := trainJobInformers(b, ns)
	faces := cacheBacked{cache: informers, api: api}

	runs := 0
	b.Run("submit=new-vs-bare", func(b *testing.B) {
		runs++ // the runner calls this again with a larger b.N: fresh names each time
		var submit, bare []time.Duration
		var own int64
		b.ResetTimer()
		for i := range b.N {
			for k := range 2 {
				id := trainjob.Identity{Engine: "bench", OwnerUID: ns, StepKey: fmt.Sprintf("new-%d-%d-%d", runs, i, k)}
				tj := p.TrainJob(id)
				t0 := time.Now()
				if (i+k)%2 == 0 {
					n := requests.Load()
					_, created, err := trainjob.Submit(b.Context(), faces, tj, id)
					submit = append(submit, time.Since(t0))
					own += requests.Load() - n
					require.NoError(b, err)
					require.True(b, created)
				} else {
					require.NoError(b, api.Create(b.Context(), tj))
					bare = append(bare, time.Since(t0))
				}
			}
		}
		b.StopTimer()
		s50, _ := percentiles(submit)
		b50, _ := percentiles(bare)
		b.ReportMetric(float64(s50.Microseconds()), "submit-us")
		b.ReportMetric(float64(b50.Microseconds()), "bare-us")
		b.ReportMetric(float64(s50)/float64(b50), "ratio")
		b.ReportMetric(float64(own)/float64(len(submit)), "api-requests/op")
	})
	b.Run("submit=replay", func(b *testing.B) {
		id := trainjob.Identity{Engine: "bench", OwnerUID: ns, StepKey: "replay"}
		_, _, err := trainjob.Submit(b.Context(), faces, p.TrainJob(id), id)
		require.NoError(b, err)
		require.Eventually(b, func() bool {
			return informers.Get(b.Context(), client.ObjectKey{Namespace: ns, Name: id.Name()}, &trainer.TrainJob{}) == nil
		}, testenv.Timeout, testenv.Interval)
		n := requests.Load()
		b.ResetTimer()
		for range b.N {
			_, created, err := trainjob.Submit(b.Context(), faces, p.TrainJob(id), id)
			require.NoError(b, err)
			require.False(b, created)
		}
		b.StopTimer()
		b.ReportMetric(float64(requests.Load()-n)/float64(b.N), "api-requests/op")
	})
}

// cacheBacked is the faces' submit client: reads from the cache, and from the apiserver for an
// object the cache has not seen yet; writes to the apiserver.
type cacheBacked struct {
	cache client.Reader
	api   client.Client
}

func (c cacheBacked) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := c.cache.Get(ctx, key, obj, opts...)
	if apierrors.IsNotFound(err) {
		return c.api.Get(ctx, key, obj, opts...)
	}
	return err
}

func (c cacheBacked) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.cache.List(ctx, list, opts...)
}

func (c cacheBacked) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.api.Create(ctx, obj, opts...)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
