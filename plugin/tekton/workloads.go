package tekton

import (
	"context"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trainstep/trainstep/core/trainjob"
)

// Kueue's Workloads: a queued TrainJob does not change while Kueue decides about it (quota
// still short, preempted then requeued), so the controller watches the Workloads, when Kueue's
// API is served at start, and reads a queued TrainJob's Workload from that cache; without Kueue
// (or installed later: restart the controller) a queued step says only that it is suspended.

// workloadsServed says whether the cluster serves Kueue's Workload API, logging why not. It is
// asked once, before the cache is built: the cache's settings for Workloads make it fail to start
// on a cluster that does not serve them, and the watch must be of the cache so configured.
func workloadsServed(mapper meta.RESTMapper, log logr.Logger) bool {
	if _, err := mapper.RESTMapping(trainjob.WorkloadGVK.GroupKind(), trainjob.WorkloadGVK.Version); err != nil {
		log.Info("Kueue's Workload API is not served: queued steps are followed by their TrainJob alone", "reason", err.Error())
		return false
	}
	return true
}

// newWorkload is an empty Workload: the key of the cache's settings for Workloads (an
// unstructured key is matched by the kind it carries) and the object watched.
func newWorkload() *unstructured.Unstructured {
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(trainjob.WorkloadGVK)
	return w
}

// workloadCache is what the cache keeps of Workloads. Kueue makes one for every job it queues,
// of every integration (Jobs, JobSets, RayClusters, pods...), each carrying its pod templates,
// and a TrainJob's carries its training script (up to 1 MiB): in a busy Kueue cluster most are
// not trainstep's, and whole they would fill the controller's memory. Only Workloads Kueue made
// for a job (the job-uid label FindWorkload selects by) are listed; no label says the job's
// kind, so of one no TrainJob owns the transform keeps only its identity and owners
// (trainjob.TrimWorkload), and of a TrainJob's what ReadWorkload reads. The transform builds a
// new object, so no managedFields or annotations are kept either.
func workloadCache() cache.ByObject {
	return cache.ByObject{
		Label:     labels.NewSelector().Add(requirement(trainjob.LabelKueueJobUID, selection.Exists)),
		Transform: trainjob.TrimWorkload,
	}
}

// watchWorkloads adds the Workload watch to b when served (workloadsServed) and returns the
// reader of Workloads, or b as it is and nil.
func (r *Reconciler) watchWorkloads(mgr manager.Manager, b *builder.Builder, served bool) (*builder.Builder, client.Reader) {
	if !served {
		return b, nil
	}
	// A watch the controller may not make would keep its caches from syncing and stop it (an
	// upgrade whose new rule was not applied): ask once, and go without Kueue's words instead.
	if err := mgr.GetAPIReader().List(context.Background(), trainjob.NewWorkloadList(), client.Limit(1)); err != nil {
		mgr.GetLogger().Error(err, "not watching Kueue's Workloads: queued steps are followed by their TrainJob alone; apply manifests/tekton/rbac.yaml (list and watch on workloads.kueue.x-k8s.io)")
		return b, nil
	}
	return b.Watches(newWorkload(), handler.EnqueueRequestsFromMapFunc(r.workloadOwner)), mgr.GetCache()
}

// workloadOwner maps a Workload to the CustomRun that controls the TrainJob owning it.
func (r *Reconciler) workloadOwner(ctx context.Context, o client.Object) []reconcile.Request {
	for _, ref := range o.GetOwnerReferences() {
		if ref.Kind == "TrainJob" {
			return r.trainJobOwner(ctx, o.GetNamespace(), ref.Name)
		}
	}
	return nil
}
