package trainjob

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
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

// Waiter follows one TrainJob and its pods with watches (informers, so a 410 Gone relists and
// resumes) until it is terminal. It never polls.
type Waiter struct {
	Client client.WithWatch
	Logs   LogSource
	Clock  clock.PassiveClock
}

// WaitOptions shape one wait.
type WaitOptions struct {
	// Timeout counts from the TrainJob's creation, so a restarted step keeps its deadline.
	Timeout time.Duration
	// KeepOnTimeout leaves the TrainJob in place when the timeout passes.
	KeepOnTimeout bool
	// OnChange is called with each new observation (phase, node count or message changed).
	OnChange func(Observation)
}

// Wait returns the terminal observation: Succeeded, Failed (with the failing node's log tail) or
// TimedOut (the TrainJob deleted unless kept). An error means the wait itself failed: the caller
// went away, the job was deleted, or the apiserver could not be read.
func (w *Waiter) Wait(ctx context.Context, namespace, name string, opts WaitOptions) (Observation, error) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
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
	events := cache.NewSharedIndexInformer(listWatch(w.Client, &corev1.EventList{}, namespace, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.Set{"involvedObject.kind": trainer.TrainJobKind, "involvedObject.name": name}.String()
	}), &corev1.Event{}, 0, cache.Indexers{})
	for _, inf := range []cache.SharedIndexInformer{jobs, pods, events} {
		if _, err := inf.AddEventHandler(notify); err != nil {
			return Observation{}, fmt.Errorf("watching TrainJob %s/%s: %w", namespace, name, err)
		}
		go inf.RunWithContext(ctx)
	}
	if !cache.WaitForCacheSync(ctx.Done(), jobs.HasSynced, pods.HasSynced, events.HasSynced) {
		return Observation{}, fmt.Errorf("watching TrainJob %s/%s: %w", namespace, name, context.Cause(ctx))
	}

	var last Observation
	var deadline <-chan time.Time
	for {
		obj, exists, err := jobs.GetStore().GetByKey(namespace + "/" + name)
		if err != nil {
			return last, fmt.Errorf("reading TrainJob %s/%s from the watch cache: %w", namespace, name, err)
		}
		if !exists {
			return last, fmt.Errorf("waiting for TrainJob %s/%s: %w", namespace, name, ErrDeleted)
		}
		tj := obj.(*trainer.TrainJob)
		obs := Observe(tj, listOf[corev1.Pod](pods.GetStore())).WithEvents(listOf[corev1.Event](events.GetStore()))
		if deadline == nil && opts.Timeout > 0 {
			left := tj.CreationTimestamp.Add(opts.Timeout).Sub(w.now())
			timer := time.NewTimer(max(left, 0))
			defer timer.Stop() //nolint:gocritic // deferInLoop: armed once, guarded by deadline == nil
			deadline = timer.C
		}
		if obs.Phase == PhaseFailed {
			obs = w.withTail(ctx, obs)
		}
		if changedEnough(last, obs) && opts.OnChange != nil {
			opts.OnChange(obs)
		}
		last = obs
		if obs.Phase.Terminal() {
			return obs, nil
		}
		select {
		case <-changed:
		case <-deadline:
			return w.timedOut(ctx, tj, obs, opts)
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

func (w *Waiter) withTail(ctx context.Context, obs Observation) Observation {
	if w.Logs == nil {
		return obs
	}
	if obs.FailedPod == "" {
		// The pod watch may trail the TrainJob's: ask the apiserver once.
		pods := &corev1.PodList{}
		if err := w.Client.List(ctx, pods, client.InNamespace(obs.Namespace), client.MatchingLabels{LabelJobSetName: obs.Name}); err == nil {
			if nodes := TrainerPods(pods.Items, obs.Name); len(nodes) > 0 {
				obs.FailedPod = failedPod(nodes)
			}
		}
	}
	if obs.FailedPod == "" {
		obs.Message += "\n(no log tail: the TrainJob has no trainer pods)"
		return obs
	}
	tail, err := w.Logs.Tail(ctx, obs.Namespace, obs.FailedPod, NodeContainer, TailLines)
	if err != nil {
		obs.Message += fmt.Sprintf("\n(no log tail: %v)", err)
		return obs
	}
	if strings.TrimSpace(tail) == "" {
		obs.Message += fmt.Sprintf("\n(no log tail: pod %s printed nothing)", obs.FailedPod)
		return obs
	}
	return obs.WithLogTail(obs.FailedPod, tail)
}

// timedOut ends a step whose timeout passed: the TrainJob is deleted (its JobSet and pods go with
// it) unless the step keeps it.
func (w *Waiter) timedOut(ctx context.Context, tj *trainer.TrainJob, obs Observation, opts WaitOptions) (Observation, error) {
	obs.Phase, obs.Reason = PhaseTimedOut, "Timeout"
	obs.Message = fmt.Sprintf("TrainJob %s did not finish within %s", tj.Name, opts.Timeout)
	now := w.now()
	obs.CompletionTime = &now
	if opts.KeepOnTimeout {
		obs.Message += "; it was kept (keepOnTimeout) and may still be running"
		return obs, nil
	}
	if err := Delete(ctx, w.Client, tj.Namespace, tj.Name); err != nil {
		return obs, err
	}
	obs.Message += "; it was deleted"
	return obs, nil
}

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
