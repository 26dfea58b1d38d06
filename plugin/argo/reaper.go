package argo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		for _, ref := range ownerWorkflows(tj) {
			r.queue.Add(types.NamespacedName{Namespace: tj.Namespace, Name: ref.Name})
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
	jobs, err := workflowJobs(ctx, r.cache, r.api, wf)
	if err != nil {
		return err
	}
	var errs []error
	for _, tj := range jobs {
		// Preconditioned on the version cached: a job kept since (keepOnTimeout) is a Conflict,
		// and the retry reads it kept.
		deleted, err := lifecycle.Abandon(ctx, r.api, tj, string(wf.UID))
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
		if !lifecycle.Abandonable(tj) { // no Workflow read for a job nothing would delete
			continue
		}
		for _, ref := range ownerWorkflows(tj) {
			key := types.NamespacedName{Namespace: tj.Namespace, Name: ref.Name}
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
			if wf == nil || !stepsOf(wf, tj) || stopping(wf) == "" {
				continue
			}
			if _, err := lifecycle.Abandon(ctx, r.api, tj, string(wf.UID)); err != nil {
				errs = append(errs, err)
			}
			break // written: another stopped owner's turn is the next sweep's, on the job as it is then
		}
	}
	return errors.Join(errs...)
}

// workflowJobs are the TrainJobs of wf's steps: those they made, from cached (which holds them),
// and those they follow (a TrainJob another workflow's step of the same cache key made:
// docs/cache.md), which carry the workflow's hold and are read from api when cache may not
// hold another workflow's jobs.
func workflowJobs(ctx context.Context, cached, api client.Reader, wf *wfv1.Workflow) ([]*trainer.TrainJob, error) {
	var jobs []*trainer.TrainJob
	seen := map[string]bool{}
	for _, q := range []struct {
		r   client.Reader
		sel client.ListOption
	}{
		{cached, client.MatchingLabels{trainjob.LabelOwnerUID: string(wf.UID), trainjob.LabelEngine: Engine}},
		{api, client.HasLabels{trainjob.HoldKey(string(wf.UID))}},
	} {
		list := &trainer.TrainJobList{}
		if err := q.r.List(ctx, list, client.InNamespace(wf.Namespace), q.sel); err != nil {
			return nil, fmt.Errorf("listing the TrainJobs of workflow %s/%s: %w", wf.Namespace, wf.Name, err)
		}
		for i := range list.Items {
			if tj := &list.Items[i]; !seen[tj.Name] {
				seen[tj.Name] = true
				jobs = append(jobs, tj)
			}
		}
	}
	return jobs, nil
}

// stepsOf says whether tj is a job of wf's steps: made by one (its owner label) or followed by
// one (its hold).
func stepsOf(wf *wfv1.Workflow, tj *trainer.TrainJob) bool {
	_, holds := tj.Labels[trainjob.HoldKey(string(wf.UID))]
	return holds || string(wf.UID) == tj.Labels[trainjob.LabelOwnerUID]
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

// ownerWorkflows are the Workflows tj belongs to: the one whose step made it and those whose
// steps follow it.
func ownerWorkflows(tj *trainer.TrainJob) []metav1.OwnerReference {
	var refs []metav1.OwnerReference
	for _, o := range tj.OwnerReferences {
		if o.Kind == "Workflow" && o.APIVersion == wfv1.SchemeGroupVersion.String() {
			refs = append(refs, o)
		}
	}
	return refs
}
