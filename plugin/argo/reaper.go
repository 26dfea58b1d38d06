package argo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/lifecycle"
	"github.com/trainstep/trainstep/core/trainjob"
)

// LabelCompleted is the label Argo sets on a Workflow when it is done.
const LabelCompleted = "workflows.argoproj.io/completed"

// reaper deletes the unfinished TrainJobs of a Workflow that was stopped, terminated, failed or
// otherwise finished: Argo never tells the plugin, so the plugin watches the Workflows. Deleting
// the Workflow itself is left to the garbage collector through the TrainJob's owner reference.
// A TrainJob kept past its step's timeout (trainjob.Kept) is never deleted.
type reaper struct {
	namespace string
	cache     cache.Cache
	api       client.Client
	log       *slog.Logger
	queue     workqueue.TypedRateLimitingInterface[types.NamespacedName]
}

func newReaper(namespace string, c cache.Cache, api client.Client, log *slog.Logger) *reaper {
	return &reaper{namespace: namespace, cache: c, api: api, log: log, queue: workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
		workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "trainstep-argo-reaper"})}
}

// register queues a Workflow on each of its changes, and on each change of a TrainJob it owns.
func (r *reaper) register(ctx context.Context) error {
	wfs, err := r.cache.GetInformer(ctx, &wfv1.Workflow{})
	if err != nil {
		return fmt.Errorf("watching Workflows (are Argo's CRDs installed?): %w", err)
	}
	enqueue := func(o any) {
		if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		if obj, ok := o.(client.Object); ok {
			r.queue.Add(types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()})
		}
	}
	if _, err := wfs.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, o any) { enqueue(o) },
	}); err != nil {
		return fmt.Errorf("watching Workflows: %w", err)
	}
	jobs, err := r.cache.GetInformer(ctx, &trainer.TrainJob{})
	if err != nil {
		return fmt.Errorf("watching TrainJobs: %w", err)
	}
	owner := func(o any) {
		tj, ok := o.(*trainer.TrainJob)
		if !ok {
			return
		}
		if name := ownerWorkflow(tj); name != "" {
			r.queue.Add(types.NamespacedName{Namespace: tj.Namespace, Name: name})
		}
	}
	if _, err := jobs.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    owner,
		UpdateFunc: func(_, o any) { owner(o) },
	}); err != nil {
		return fmt.Errorf("watching TrainJobs: %w", err)
	}
	return nil
}

func (r *reaper) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		r.queue.ShutDown()
	}()
	for {
		key, shutdown := r.queue.Get()
		if shutdown {
			return
		}
		if err := r.reconcile(ctx, key); err != nil {
			r.log.Error("cleaning up after a workflow", "workflow", key.String(), "error", err)
			r.queue.AddRateLimited(key)
		} else {
			r.queue.Forget(key)
		}
		r.queue.Done(key)
	}
}

// reconcile deletes the workflow's unfinished TrainJobs if the workflow is stopping or done. A
// Workflow the cache does not know is left alone: it may simply not be listed yet, and a deleted
// one takes its TrainJobs with it through the owner reference.
func (r *reaper) reconcile(ctx context.Context, key types.NamespacedName) error {
	wf := &wfv1.Workflow{}
	if err := r.cache.Get(ctx, key, wf); err != nil {
		return client.IgnoreNotFound(err)
	}
	why := stopping(wf)
	if why == "" {
		return nil
	}
	list := &trainer.TrainJobList{}
	if err := r.cache.List(ctx, list, client.InNamespace(wf.Namespace),
		client.MatchingLabels{trainjob.LabelOwnerUID: string(wf.UID), trainjob.LabelEngine: Engine}); err != nil {
		return fmt.Errorf("listing the TrainJobs of workflow %s: %w", key, err)
	}
	var errs []error
	for i := range list.Items {
		tj := &list.Items[i]
		// Preconditioned on the version cached: a job kept since (keepOnTimeout) is a Conflict,
		// and the retry reads it kept.
		deleted, err := lifecycle.Abandon(ctx, r.api, tj)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if deleted {
			r.log.Info("deleted the TrainJob of a stopped workflow", "workflow", key.String(), "trainjob", tj.Name, "reason", why)
		}
	}
	return errors.Join(errs...)
}

// sweep is reconcile for every workflow that owns an unfinished TrainJob, read from the apiserver.
func (r *reaper) sweep(ctx context.Context) error {
	list := &trainer.TrainJobList{}
	if err := r.api.List(ctx, list, client.InNamespace(r.namespace), client.MatchingLabels{trainjob.LabelManagedBy: trainjob.ManagedByValue, trainjob.LabelEngine: Engine}); err != nil {
		return fmt.Errorf("listing TrainJobs to clean up: %w", err)
	}
	var errs []error
	workflows := map[types.NamespacedName]*wfv1.Workflow{} // one read per workflow; nil: gone or unreadable
	for i := range list.Items {
		tj := &list.Items[i]
		name := ownerWorkflow(tj)
		if name == "" || !lifecycle.Abandonable(tj) { // no Workflow read for a job nothing would delete
			continue
		}
		key := types.NamespacedName{Namespace: tj.Namespace, Name: name}
		wf, seen := workflows[key]
		if !seen {
			wf = &wfv1.Workflow{}
			if err := r.api.Get(ctx, key, wf); err != nil {
				if !apierrors.IsNotFound(err) {
					errs = append(errs, fmt.Errorf("reading workflow %s: %w", key, err))
				}
				wf = nil
			}
			workflows[key] = wf
		}
		if wf == nil || string(wf.UID) != tj.Labels[trainjob.LabelOwnerUID] || stopping(wf) == "" {
			continue
		}
		if _, err := lifecycle.Abandon(ctx, r.api, tj); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// stopping says why a workflow's running TrainJobs must go, or "" if they may run on.
func stopping(wf *wfv1.Workflow) string {
	switch {
	case wf.DeletionTimestamp != nil:
		return "workflow deleted"
	case wf.Spec.Shutdown.Enabled():
		return "workflow shutdown: " + string(wf.Spec.Shutdown)
	case wf.Status.Phase.Completed():
		return "workflow " + string(wf.Status.Phase)
	case wf.Labels[LabelCompleted] == "true":
		return "workflow completed"
	}
	return ""
}

func ownerWorkflow(tj *trainer.TrainJob) string {
	for _, o := range tj.OwnerReferences {
		if o.Kind == "Workflow" && o.APIVersion == wfv1.SchemeGroupVersion.String() {
			return o.Name
		}
	}
	return ""
}
