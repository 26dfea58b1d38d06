package trainjob

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrDeleted means the TrainJob went away while the step waited for it.
var ErrDeleted = errors.New("the TrainJob was deleted before it finished")

// ErrForbidden means the caller may not read what following a TrainJob needs.
var ErrForbidden = errors.New("forbidden")

// Waiter follows one TrainJob and its pods with watches (informers, so a 410 Gone relists and
// resumes) until it is terminal. It never polls. Its three watches (the TrainJob, its pods, the
// namespace's Warning Events) are streams of the Client's HTTP/2 connection, not connections of their own,
// when the Client's HTTP client is shared (internal/cli's run shares one with the log stream).
type Waiter struct {
	Client client.WithWatch
	Logs   LogSource
	Clock  clock.PassiveClock
}

// WaitOptions shape one wait.
type WaitOptions struct {
	// Timeout counts from Since (else the TrainJob's creation), so a restarted step keeps its
	// deadline.
	Timeout time.Duration
	// StartTimeout fails the step, with the cause, when the TrainJob has not started by then
	// (see Deadlines.StartTimeout).
	StartTimeout time.Duration
	// KeepOnTimeout leaves the TrainJob in place when the timeout passes.
	KeepOnTimeout bool
	// Since is when the deadlines start: the TrainJob's creation, which the caller knows from
	// Submit. With it the deadline is armed before the watches sync, so a watch that never syncs
	// cannot outlive it.
	Since time.Time
	// OnChange is called with each new observation on the way (phase, node count or message
	// changed); the terminal one is Wait's result, not a change.
	OnChange func(Observation)
	// OnWarning is told of a failure the wait carries on through: recording on the TrainJob
	// that it started (MarkStarted), which the next change tries again.
	OnWarning func(error)
}

func (o WaitOptions) deadlines() Deadlines {
	return Deadlines{Timeout: o.Timeout, StartTimeout: o.StartTimeout, KeepOnTimeout: o.KeepOnTimeout, Since: o.Since}
}

// Wait returns the terminal observation: Succeeded, Failed (with the failing node's log tail) or
// TimedOut (the TrainJob deleted unless kept). An error means the wait itself failed: the caller
// went away, the job was deleted, the apiserver could not be read, or the caller may not watch
// what a wait needs (a 403 ends the wait at once, naming the permission).
func (w *Waiter) Wait(ctx context.Context, namespace, name string, opts WaitOptions) (Observation, error) {
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	changed := make(chan struct{}, 1)
	notify := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke(changed) },
		UpdateFunc: func(any, any) { poke(changed) },
		DeleteFunc: func(any) { poke(changed) },
	}
	jobs := cache.NewSharedIndexInformer(listWatch(w.Client, &trainer.TrainJobList{}, namespace, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}), &trainer.TrainJob{}, 0, cache.Indexers{})
	pods := cache.NewSharedIndexInformer(listWatch(w.Client, &corev1.PodList{}, namespace, func(o *metav1.ListOptions) {
		o.LabelSelector = labels.Set{LabelJobSetName: name}.String()
	}), &corev1.Pod{}, 0, cache.Indexers{})
	// The namespace's Warning Events: those about the TrainJob, its JobSet, Jobs and pods are
	// among them, under names no one selector can match (events.go picks them out).
	events := cache.NewSharedIndexInformer(listWatch(w.Client, &corev1.EventList{}, namespace, func(o *metav1.ListOptions) {
		o.FieldSelector = EventSelector().String()
	}), &corev1.Event{}, 0, cache.Indexers{})
	// The watch caches keep only what Decide reads.
	_ = jobs.SetTransform(StripManagedFields)
	_ = pods.SetTransform(TrimPod)
	_ = events.SetTransform(TrimEvent)
	// Only the Events about this job wake the wait, not every Warning of the namespace.
	ours := cache.FilteringResourceEventHandler{Handler: notify, FilterFunc: func(obj any) bool {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		e, ok := obj.(*corev1.Event)
		return ok && slices.Contains(EventTrainJobs(e), name)
	}}
	for what, inf := range map[string]cache.SharedIndexInformer{"trainjobs": jobs, "pods": pods, "events": events} {
		var h cache.ResourceEventHandler = notify
		if inf == events {
			h = ours
		}
		if _, err := inf.AddEventHandler(h); err != nil {
			return Observation{}, fmt.Errorf("watching TrainJob %s/%s: %w", namespace, name, err)
		}
		// A list the caller may not make is retried forever by the reflector: end the wait instead.
		_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			if apierrors.IsForbidden(err) {
				stop(fmt.Errorf("%w: following a TrainJob needs get, list and watch on %s in namespace %s: %w", ErrForbidden, what, namespace, err))
			}
		})
		go inf.RunWithContext(ctx)
	}
	d := opts.deadlines()
	// The deadline is armed before the caches sync (when the caller knows when it starts).
	var timer *time.Timer
	wake := func(at time.Time) <-chan time.Time {
		if timer != nil {
			timer.Stop()
		}
		if at.IsZero() {
			return nil
		}
		timer = time.NewTimer(max(at.Sub(w.now()), 0))
		return timer.C
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var deadline <-chan time.Time
	if !d.Since.IsZero() && d.Timeout > 0 {
		deadline = wake(d.Since.Add(d.Timeout))
	}
	synced := make(chan bool, 1)
	go func() { synced <- cache.WaitForCacheSync(ctx.Done(), jobs.HasSynced, pods.HasSynced, events.HasSynced) }()
	select {
	case ok := <-synced:
		if !ok {
			return Observation{}, fmt.Errorf("watching TrainJob %s/%s: %w", namespace, name, context.Cause(ctx))
		}
	case <-deadline:
		// The watches never synced: decide from the apiserver's word alone.
		tj := &trainer.TrainJob{}
		if err := w.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, tj); err != nil {
			return Observation{}, fmt.Errorf("the step's timeout passed while its watches were still syncing, and reading TrainJob %s/%s failed: %w", namespace, name, err)
		}
		return Conclude(ctx, w.Client, w.tailer(), Decide(Snapshot{TrainJob: tj, Now: w.now()}, d))
	}

	var last Observation
	marked := false // this process recorded the start; the watch may not show it yet
	var queue *workloadWatch
	defer func() { queue.stop() }()
	for {
		obj, exists, err := jobs.GetStore().GetByKey(namespace + "/" + name)
		if err != nil {
			return last, fmt.Errorf("reading TrainJob %s/%s from the watch cache: %w", namespace, name, err)
		}
		if !exists {
			return last, fmt.Errorf("waiting for TrainJob %s/%s: %w", namespace, name, ErrDeleted)
		}
		tj := obj.(*trainer.TrainJob)
		if queue == nil && Queued(tj) {
			queue = w.watchWorkload(ctx, tj, changed, opts.OnWarning)
		}
		v := Decide(Snapshot{
			TrainJob: tj,
			Pods:     listOf[corev1.Pod](pods.GetStore()),
			Events:   listOf[corev1.Event](events.GetStore()),
			Workload: queue.workload(tj),
			Now:      w.now(),
		}, d)
		if v.Phase.Terminal() {
			return Conclude(ctx, w.Client, w.tailer(), v) // the caller reports the end; OnChange is for the way there
		}
		if !v.MarkStarted.IsZero() && !marked {
			err := MarkStarted(ctx, w.Client, namespace, name, v.MarkStarted)
			marked = err == nil
			if err != nil && opts.OnWarning != nil {
				opts.OnWarning(err)
			}
		}
		if changedEnough(last, v.Observation) {
			obs := v.Observation
			if v.TailPod != "" && v.TailPod != last.FailedPod {
				// A node failed and its Job retries it: say why now, not at the very end.
				obs = w.tailer().WithTail(ctx, v)
			}
			if opts.OnChange != nil {
				opts.OnChange(obs)
			}
		}
		last = v.Observation
		if v.TailPod != "" {
			last.FailedPod = v.TailPod
		}
		deadline = wake(v.Wake)
		select {
		case <-changed:
		case <-deadline:
		case <-ctx.Done():
			return last, fmt.Errorf("waiting for TrainJob %s/%s: %w", namespace, name, context.Cause(ctx))
		}
	}
}

func (w *Waiter) now() time.Time {
	if w.Clock == nil {
		return time.Now()
	}
	return w.Clock.Now()
}

func (w *Waiter) tailer() Tailer { return Tailer{Logs: w.Logs, Pods: w.Client} }

func changedEnough(a, b Observation) bool {
	return a.Phase != b.Phase || a.Message != b.Message || a.RunningNodes != b.RunningNodes ||
		ptr.Deref(a.Progress, -1) != ptr.Deref(b.Progress, -1)
}

func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func listOf[T any](s cache.Store) []T {
	items := s.List()
	out := make([]T, 0, len(items))
	for _, it := range items {
		out = append(out, *it.(*T))
	}
	return out
}

// listWatch adapts a controller-runtime client to an informer, narrowed by sel.
func listWatch(c client.WithWatch, list client.ObjectList, namespace string, sel func(*metav1.ListOptions)) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			sel(&o)
			l := list.DeepCopyObject().(client.ObjectList)
			return l, c.List(ctx, l, client.InNamespace(namespace), &client.ListOptions{Raw: &o})
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			sel(&o)
			l := list.DeepCopyObject().(client.ObjectList)
			return c.Watch(ctx, l, client.InNamespace(namespace), &client.ListOptions{Raw: &o})
		},
	}
}
