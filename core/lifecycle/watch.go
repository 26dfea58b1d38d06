package lifecycle

import (
	"context"
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
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
)

// ErrForbidden means the caller may not watch what following a TrainJob needs.
var ErrForbidden = trainjob.ErrForbidden

// watches are the three watches a one-process face follows its step with: the TrainJob (by
// name), its pods (by the JobSet label), and the namespace's Warning Events; and, once the job
// is queued, its Kueue Workload. Informers, so a 410 Gone relists and resumes; never a poll.
// Their streams share the client's HTTP/2 connection when its HTTP client is shared.
type watches struct {
	c         client.WithWatch
	namespace string
	name      string
	jobs      cache.SharedIndexInformer
	pods      cache.SharedIndexInformer
	events    cache.SharedIndexInformer
	queue     *workloadWatch
	changed   chan struct{}
	stop      context.CancelCauseFunc
	ctx       context.Context
	onWarning func(error)
	// creates are this process's creates the TrainJob watch has not shown yet.
	creates *Creates
}

// startWatches starts the watches of TrainJob name and what is about it; changes poke changed.
// A list the caller may not make ends ctx with ErrForbidden, naming the permission.
func startWatches(ctx context.Context, c client.WithWatch, namespace, name string, onWarning func(error)) (*watches, error) {
	w := &watches{c: c, namespace: namespace, name: name, changed: make(chan struct{}, 1), onWarning: onWarning, creates: NewCreates()}
	w.ctx, w.stop = context.WithCancelCause(ctx)
	w.jobs = cache.NewSharedIndexInformer(listWatch(c, &trainer.TrainJobList{}, namespace, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}), &trainer.TrainJob{}, 0, cache.Indexers{})
	w.pods = cache.NewSharedIndexInformer(listWatch(c, &corev1.PodList{}, namespace, func(o *metav1.ListOptions) {
		o.LabelSelector = labels.Set{trainjob.LabelJobSetName: name}.String()
	}), &corev1.Pod{}, 0, cache.Indexers{})
	// The namespace's Warning Events: those about the TrainJob, its JobSet, Jobs and pods are
	// among them, under names no one selector can match (trainjob's events.go picks them out).
	w.events = cache.NewSharedIndexInformer(listWatch(c, &corev1.EventList{}, namespace, func(o *metav1.ListOptions) {
		o.FieldSelector = trainjob.EventSelector().String()
	}), &corev1.Event{}, 0, cache.Indexers{})
	// The watch caches keep only what Decide reads.
	_ = w.jobs.SetTransform(trainjob.StripManagedFields)
	_ = w.pods.SetTransform(trainjob.TrimPod)
	_ = w.events.SetTransform(trainjob.TrimEvent)
	for what, inf := range map[string]cache.SharedIndexInformer{"trainjobs": w.jobs, "pods": w.pods, "events": w.events} {
		if err := w.run(what, inf); err != nil {
			w.stop(nil)
			return nil, err
		}
	}
	return w, nil
}

// run starts one informer; a change pokes the step (of the Events, only those about this job).
func (w *watches) run(what string, inf cache.SharedIndexInformer) error {
	var h cache.ResourceEventHandler = cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.seen(inf, o); poke(w.changed) },
		UpdateFunc: func(_, o any) { w.seen(inf, o); poke(w.changed) },
		DeleteFunc: func(any) { poke(w.changed) },
	}
	if inf == w.events {
		h = cache.FilteringResourceEventHandler{Handler: h, FilterFunc: func(obj any) bool {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			e, ok := obj.(*corev1.Event)
			return ok && slices.Contains(trainjob.EventTrainJobs(e), w.name)
		}}
	}
	if _, err := inf.AddEventHandler(h); err != nil {
		return fmt.Errorf("watching TrainJob %s/%s: %w", w.namespace, w.name, err)
	}
	// A list the caller may not make is retried forever by the reflector: end the step instead.
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		if apierrors.IsForbidden(err) {
			w.stop(fmt.Errorf("%w: following a TrainJob needs get, list and watch on %s in namespace %s: %w", ErrForbidden, what, w.namespace, err))
		}
	})
	go inf.RunWithContext(w.ctx)
	return nil
}

// seen tells the record of creates that the TrainJob watch shows a job, so a later absence is
// a deletion, not a watch that has not caught up.
func (w *watches) seen(inf cache.SharedIndexInformer, o any) {
	if inf == w.jobs {
		w.creates.Seen(o)
	}
}

// synced waits for the three watches to list; false when ctx ended first (context.Cause says why).
func (w *watches) synced() bool {
	return cache.WaitForCacheSync(w.ctx.Done(), w.jobs.HasSynced, w.pods.HasSynced, w.events.HasSynced)
}

func (w *watches) close() {
	w.queue.stop()
	w.stop(nil)
}

// snapshot is the TrainJob with its pods, Events and Workload, as the watches have them.
func (w *watches) snapshot(_ context.Context, tj *trainer.TrainJob) (trainjob.Snapshot, error) {
	if w.queue == nil && trainjob.WorkloadMatters(tj) {
		w.queue = watchWorkload(w.ctx, w.c, tj, w.changed, w.onWarning)
	}
	return trainjob.Snapshot{
		TrainJob: tj,
		Pods:     listOf[corev1.Pod](w.pods.GetStore()),
		Events:   listOf[corev1.Event](w.events.GetStore()),
		Workload: w.queue.workload(tj),
	}, nil
}

// reader is the watches as the engine's Cache: the TrainJob from its watch; a List (a job of
// this step's identity under another name, made by an earlier release) from the apiserver.
type reader struct {
	client.Reader
	w *watches
}

func (r reader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	tj, ok := obj.(*trainer.TrainJob)
	if !ok || key.Namespace != r.w.namespace || key.Name != r.w.name {
		return r.Reader.Get(ctx, key, obj, opts...)
	}
	item, exists, err := r.w.jobs.GetStore().GetByKey(key.Namespace + "/" + key.Name)
	switch {
	case err != nil:
		return fmt.Errorf("reading TrainJob %s from the watch cache: %w", key, err)
	case !exists:
		return apierrors.NewNotFound(trainer.GroupVersion.WithResource("trainjobs").GroupResource(), key.Name)
	}
	item.(*trainer.TrainJob).DeepCopyInto(tj)
	return nil
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

// backoff bounds how soon a look that failed in a way that may pass is tried again.
const (
	backoffFirst = 200 * time.Millisecond
	backoffMax   = 10 * time.Second
)
