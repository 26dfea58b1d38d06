package podrunner

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Select says which pods a Watch runs.
type Select struct {
	// Namespace limits the watch to one namespace; "" watches all.
	Namespace string
	// Labels limits the watch to the pods they match; nil matches all.
	Labels labels.Selector
	// Want is asked about every pod the watch sees (each time it changes): a pod is run the first
	// time Want says yes. nil wants every pod.
	Want func(*corev1.Pod) bool
}

// Watch runs the pods a Select picks as they appear, until Stop.
type Watch struct {
	r      *Runner
	sel    Select
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	runs    map[types.UID]*PodRun
	cancels map[types.UID]context.CancelFunc
	errs    []error
}

// Watch runs every pod sel picks with RunPod, once, when it appears (or when Want first says
// yes), until Stop. A pod being deleted has its containers stopped (SIGTERM), as the kubelet
// does; a pod that has already ended is not run.
func (r *Runner) Watch(ctx context.Context, sel Select) *Watch {
	ctx, cancel := context.WithCancel(ctx)
	w := &Watch{r: r, sel: sel, cancel: cancel, done: make(chan struct{}),
		runs: map[types.UID]*PodRun{}, cancels: map[types.UID]context.CancelFunc{}}
	go w.loop(ctx)
	return w
}

func (w *Watch) listOptions() []client.ListOption {
	var opts []client.ListOption
	if w.sel.Namespace != "" {
		opts = append(opts, client.InNamespace(w.sel.Namespace))
	}
	if w.sel.Labels != nil {
		opts = append(opts, client.MatchingLabelsSelector{Selector: w.sel.Labels})
	}
	return opts
}

// loop lists, then watches from the list, again whenever the watch ends.
func (w *Watch) loop(ctx context.Context) {
	defer close(w.done)
	c := w.r.opts.Client
	for ctx.Err() == nil {
		l := &corev1.PodList{}
		if err := c.List(ctx, l, w.listOptions()...); err != nil {
			if ctx.Err() == nil {
				w.fail(fmt.Errorf("listing the pods to run: %w", err))
			}
			return
		}
		for i := range l.Items {
			w.seen(ctx, &l.Items[i])
		}
		wi, err := c.Watch(ctx, &corev1.PodList{}, append(w.listOptions(),
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: l.ResourceVersion}})...)
		if err != nil {
			if ctx.Err() == nil {
				w.fail(fmt.Errorf("watching the pods to run: %w", err))
			}
			return
		}
		for ev := range wi.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue // a watch error: list again
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				w.seen(ctx, pod)
			case watch.Deleted:
				w.stop(pod.UID)
			}
		}
		wi.Stop()
	}
}

// seen starts pod, or tells its run that it changed, or stops it when it is being deleted.
func (w *Watch) seen(ctx context.Context, pod *corev1.Pod) {
	if !pod.DeletionTimestamp.IsZero() {
		w.stop(pod.UID)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if run, ok := w.runs[pod.UID]; ok {
		if err := run.Update(pod); err != nil {
			w.errs = append(w.errs, err)
		}
		return
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return
	}
	if w.sel.Want != nil && !w.sel.Want(pod) {
		return
	}
	podCtx, cancel := context.WithCancel(ctx)
	run, err := w.r.RunPod(podCtx, pod)
	if err != nil {
		cancel()
		w.errs = append(w.errs, err)
		return
	}
	w.runs[pod.UID], w.cancels[pod.UID] = run, cancel
}

func (w *Watch) stop(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c := w.cancels[uid]; c != nil {
		c()
	}
}

func (w *Watch) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs = append(w.errs, err)
}

// Runs are the pods started so far, by name.
func (w *Watch) Runs() []*PodRun {
	w.mu.Lock()
	defer w.mu.Unlock()
	runs := make([]*PodRun, 0, len(w.runs))
	for _, r := range w.runs {
		runs = append(runs, r)
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].Name < runs[j].Name })
	return runs
}

// Err is what went wrong so far starting or running a pod (not a container's own failure, which
// is the pod's status): nil while all is well.
func (w *Watch) Err() error {
	var errs []error
	for _, r := range w.Runs() {
		select {
		case <-r.Done():
			if _, err := r.Result(); err != nil {
				errs = append(errs, err)
			}
		default:
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return errors.Join(append(errs, w.errs...)...)
}

// Stop ends the watch and every pod still running (SIGTERM, then SIGKILL after a grace period),
// waits for them, and returns what went wrong starting or running any pod.
func (w *Watch) Stop() error {
	w.cancel()
	<-w.done
	var errs []error
	for _, r := range w.Runs() {
		<-r.Done()
		if _, err := r.Result(); err != nil {
			errs = append(errs, err)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return errors.Join(append(errs, w.errs...)...)
}
