package tekton

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/builder"
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

// watchWorkloads adds the Workload watch to b and returns the reader of Workloads, or b as it
// is and nil when the cluster serves no Kueue Workload API.
func (r *Reconciler) watchWorkloads(mgr manager.Manager, b *builder.Builder) (*builder.Builder, client.Reader) {
	if _, err := mgr.GetRESTMapper().RESTMapping(trainjob.WorkloadGVK.GroupKind(), trainjob.WorkloadGVK.Version); err != nil {
		mgr.GetLogger().Info("Kueue's Workload API is not served: queued steps are followed by their TrainJob alone", "reason", err.Error())
		return b, nil
	}
	// A watch the controller may not make would keep its caches from syncing and stop it (an
	// upgrade whose new rule was not applied): ask once, and go without Kueue's words instead.
	if err := mgr.GetAPIReader().List(context.Background(), trainjob.NewWorkloadList(), client.Limit(1)); err != nil {
		mgr.GetLogger().Error(err, "not watching Kueue's Workloads: queued steps are followed by their TrainJob alone; apply manifests/tekton/rbac.yaml (list and watch on workloads.kueue.x-k8s.io)")
		return b, nil
	}
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(trainjob.WorkloadGVK)
	return b.Watches(w, handler.EnqueueRequestsFromMapFunc(r.workloadOwner)), mgr.GetCache()
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
