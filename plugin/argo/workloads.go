package argo

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
)

// Kueue's Workloads say, in Kueue's words, why a queued TrainJob waits. Each carries its job's
// pod templates (a TrainJob's: the training script, up to 1 MiB), and most steps never need
// one, so the plugin reads them only once a look needs one (trainjob.WorkloadMatters), and then
// from an informer of its namespace's Workloads, trimmed to what is read (trainjob.TrimWorkload)
// and indexed by Kueue's job-uid label: a look costs no request, and a change to a Workload wakes
// the calls held on its TrainJob as a change to the TrainJob does. Without Kueue's API, or the
// right to list and watch Workloads, the informer stops at its first refusal, says so once, and
// steps follow their TrainJobs alone.

// indexWorkloadJob indexes Workloads by the UID of the job they stand for (LabelKueueJobUID).
const indexWorkloadJob = "job-uid"

// workloads is the lazily started Workload informer.
type workloads struct {
	client    dynamic.Interface
	namespace string
	log       *slog.Logger
	wake      func(obj any) // wakes the calls held on the Workload's TrainJob
	// firstWait bounds how long the look that starts the informer waits for its list.
	firstWait time.Duration

	mu     sync.Mutex
	runCtx context.Context // the plugin's run (Start); nil before it
	cur    atomic.Pointer[workloadInformer]
	off    atomic.Bool // the API is not served or not ours to watch
}

// workloadInformer is a started informer and what says it has listed (or given up).
type workloadInformer struct {
	informer toolscache.SharedIndexInformer
	ready    <-chan struct{}
}

func newWorkloads(c dynamic.Interface, namespace string, log *slog.Logger, firstWait time.Duration, wake func(any)) *workloads {
	return &workloads{client: c, namespace: namespace, log: log, firstWait: firstWait, wake: wake}
}

// run lets looks start the informer, for as long as ctx runs.
func (w *workloads) run(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.runCtx = ctx
}

// of is tj's Workload as the informer has it, nil when it does not matter to the step, Kueue has
// not made it, or Workloads cannot be read (yet). The look that first needs a Workload starts the
// informer and waits up to firstWait for its list; later looks never wait, so a list that keeps
// failing (and is retried) does not hold up every call.
func (w *workloads) of(ctx context.Context, tj *trainer.TrainJob) *trainjob.Workload {
	if !trainjob.Queued(tj) || tj.UID == "" || w.off.Load() {
		return nil
	}
	// Started only for a look its Workload can change; once running, read for every queued job:
	// the counts a finished step reports (preemptions, evictions) are Kueue's, and the cache
	// answers without a request.
	inf, fresh := w.cur.Load(), false
	if inf == nil && trainjob.WorkloadMatters(tj) {
		inf, fresh = w.started()
	}
	if inf == nil || !w.listed(ctx, inf, fresh) {
		return nil
	}
	objs, err := inf.informer.GetIndexer().ByIndex(indexWorkloadJob, string(tj.UID))
	if err != nil || len(objs) == 0 {
		return nil
	}
	items := make([]unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok {
			items = append(items, *u) // a shallow copy: ReadWorkload only reads
		}
	}
	return trainjob.WorkloadOf(tj, items)
}

// listed reports whether the informer has listed and not given up; wait says to wait for it.
func (w *workloads) listed(ctx context.Context, inf *workloadInformer, wait bool) bool {
	select {
	case <-inf.ready:
	default:
		if !wait {
			return false
		}
		t := time.NewTimer(w.firstWait)
		defer t.Stop()
		select {
		case <-inf.ready:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	return !w.off.Load()
}

// started returns the running informer, starting it on the first call after run (fresh).
func (w *workloads) started() (inf *workloadInformer, fresh bool) {
	if inf := w.cur.Load(); inf != nil {
		return inf, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if inf := w.cur.Load(); inf != nil || w.runCtx == nil {
		return inf, false
	}
	inf, err := w.start(w.runCtx)
	if err != nil {
		w.giveUp(err)
		return nil, false
	}
	w.cur.Store(inf)
	return inf, true
}

func (w *workloads) start(parent context.Context) (*workloadInformer, error) {
	ctx, stop := context.WithCancel(parent)
	gvr := trainjob.WorkloadGVK.GroupVersion().WithResource("workloads")
	inf := dynamicinformer.NewFilteredDynamicInformer(w.client, gvr, w.namespace, 0,
		toolscache.Indexers{indexWorkloadJob: workloadJobUID}, nil).Informer()
	// TrimWorkload rebuilds each Workload from the fields read: no pod sets, no managedFields.
	if err := inf.SetTransform(trainjob.TrimWorkload); err != nil {
		stop()
		return nil, err
	}
	ready := make(chan struct{})
	var once sync.Once
	done := func() { once.Do(func() { close(ready) }) }
	if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *toolscache.Reflector, err error) {
		if !refused(err) {
			toolscache.DefaultWatchErrorHandler(ctx, r, err) // retried with backoff
			return
		}
		// Asking again would be refused again, at every backoff, for as long as the plugin runs.
		w.giveUp(err)
		stop()
		done()
	}); err != nil {
		stop()
		return nil, err
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    w.wake,
		UpdateFunc: func(_, o any) { w.wake(o) },
		DeleteFunc: w.wake,
	}); err != nil {
		stop()
		return nil, err
	}
	go inf.RunWithContext(ctx)
	go func() {
		select {
		case <-inf.HasSyncedChecker().Done():
		case <-ctx.Done():
		}
		done()
	}()
	return &workloadInformer{informer: inf, ready: ready}, nil
}

// giveUp turns the Workload reads off for good, saying why once.
func (w *workloads) giveUp(err error) {
	if w.off.CompareAndSwap(false, true) {
		w.log.Warn("not reading Kueue's Workloads: queued steps are followed by their TrainJob alone, without Kueue's words; "+
			"install Kueue, or grant list and watch on workloads.kueue.x-k8s.io (manifests/argo/rbac.yaml), and restart the plugin",
			"namespace", w.namespace, "error", err)
	}
}

// refused reports an error no retry mends: the API is not served (no Kueue, or a Kueue without
// v1beta2) or the plugin may not list or watch Workloads.
func refused(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsMethodNotSupported(err)
}

func workloadJobUID(obj any) ([]string, error) {
	o, ok := obj.(client.Object)
	if !ok {
		return nil, nil
	}
	if uid := o.GetLabels()[trainjob.LabelKueueJobUID]; uid != "" {
		return []string{uid}, nil
	}
	return nil, nil
}

// workloadTrainJobs names the TrainJobs a Workload stands for (its owner references), whose
// held calls its change wakes.
func workloadTrainJobs(o client.Object) []string {
	var names []string
	for _, ref := range o.GetOwnerReferences() {
		if ref.Kind == "TrainJob" {
			names = append(names, ref.Name)
		}
	}
	return names
}
