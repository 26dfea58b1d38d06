package argo

import (
	"context"
	"errors"
	"fmt"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trainstep/trainstep/core/lifecycle"
	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/managed"
)

// JanitorName names the janitor's controller, Lease and Events.
const JanitorName = "trainstep-argo-janitor"

// Janitor is the part of the Argo face that outlives any agent pod. The plugin lives in the
// agent pod of one workflow and its reaper with it: when that pod is evicted or its node dies,
// Argo fails the plugin's nodes (and a retryStrategy starts the next attempt) while the
// TrainJobs train on. The Janitor runs once per cluster (manifests/argo/janitor.yaml) and
// deletes every unfinished trainstep TrainJob whose Argo node is finished, or whose Workflow is
// stopping or done: at most one attempt of a step trains, and nothing trains for a node Argo
// has given up on.
type Janitor struct {
	client client.Client
	// tally counts the steps that ended, from the Workflows' nodes (tally.go).
	tally *tally
}

var _ reconcile.Reconciler = (*Janitor)(nil)

// NewJanitor builds a manager running the Janitor: it caches every Workflow of the cluster,
// trimmed to what the Janitor reads (trimForJanitor), and the Argo face's TrainJobs, without
// their managedFields. Its step metrics register on reg (controller-runtime's registry, which the
// manager serves on its /metrics, when nil).
func NewJanitor(cfg *rest.Config, o managed.Options, reg prometheus.Registerer) (manager.Manager, error) {
	scheme, err := trainjob.NewScheme(wfv1.AddToScheme)
	if err != nil {
		return nil, err
	}
	mgr, err := managed.New(cfg, scheme, cache.Options{
		DefaultTransform: trainjob.StripManagedFields,
		ByObject: map[client.Object]cache.ByObject{
			&trainer.TrainJob{}: {Label: JanitorSelector()},
			&wfv1.Workflow{}:    {Transform: trimForJanitor},
		},
	}, o)
	if err != nil {
		return nil, err
	}
	if reg == nil {
		reg = ctrlmetrics.Registry
	}
	if err := SetupJanitor(mgr, reg); err != nil {
		return nil, err
	}
	return mgr, nil
}

// SetupJanitor adds the Janitor to a manager whose scheme knows Workflows and TrainJobs, its
// step metrics to reg.
func SetupJanitor(mgr ctrl.Manager, reg prometheus.Registerer) error {
	j := &Janitor{client: mgr.GetClient(), tally: newTally()}
	if err := j.tally.register(reg); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(JanitorName).
		For(&wfv1.Workflow{}).
		Watches(&trainer.TrainJob{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			tj, ok := o.(*trainer.TrainJob)
			if !ok {
				return nil
			}
			var reqs []reconcile.Request
			for _, ref := range ownerWorkflows(tj) {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: tj.Namespace, Name: ref.Name}})
			}
			return reqs
		})).
		Complete(j)
}

// JanitorSelector is the TrainJobs the Janitor looks at: the Argo face's own.
func JanitorSelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{trainjob.LabelManagedBy: trainjob.ManagedByValue, trainjob.LabelEngine: Engine})
}

// Reconcile counts one Workflow's steps that ended and looks at its unfinished TrainJobs.
func (j *Janitor) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if err := j.tally.baseline(ctx, j.client); err != nil {
		return reconcile.Result{}, err
	}
	wf := &wfv1.Workflow{}
	if err := j.client.Get(ctx, req.NamespacedName, wf); err != nil {
		if apierrors.IsNotFound(err) {
			j.tally.forget(req.NamespacedName)
		}
		// A deleted Workflow takes its TrainJobs with it through their owner reference.
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	j.tally.count(wf)
	// The janitor's cache holds every Argo TrainJob, those the workflow's steps follow too.
	jobs, err := workflowJobs(ctx, j.client, j.client, wf)
	if err != nil {
		return reconcile.Result{}, err
	}
	var errs []error
	var again bool
	for _, tj := range jobs {
		why := orphaned(wf, tj)
		if why == "" {
			continue
		}
		deleted, err := lifecycle.Abandon(ctx, j.client, tj, string(wf.UID))
		switch {
		case apierrors.IsConflict(err):
			again = true // changed since the cache showed it (kept, perhaps): look again
			continue
		case err != nil:
			errs = append(errs, err)
			continue
		}
		if deleted {
			ctrl.LoggerFrom(ctx).Info("deleted an orphaned TrainJob", "workflow", req.String(), "trainjob", tj.Name, "reason", why)
		}
	}
	if again && len(errs) == 0 {
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	return reconcile.Result{}, errors.Join(errs...)
}

// orphaned says why wf must let go of an unfinished TrainJob, or "": wf is stopping or done, or
// the Argo node the job was made for has finished (failed when the agent was lost, say).
func orphaned(wf *wfv1.Workflow, tj *trainer.TrainJob) string {
	if why := stopping(wf); why != "" {
		return why
	}
	key := tj.Annotations[trainjob.AnnotationStepKey]
	if key == "" || tj.Labels[trainjob.LabelOwnerUID] != string(wf.UID) {
		// A job the workflow's step follows names another workflow's node: it is let go of when
		// the workflow stops, and its own workflow's janitor run sees to its node.
		return ""
	}
	node := stepNode(wf, key, engineAttempt(tj))
	if node == nil || !node.Phase.Fulfilled(nil) {
		return ""
	}
	return fmt.Sprintf("its Argo node %s is %s: %s", node.Name, node.Phase, node.Message)
}

// stepNode is the Argo node a TrainJob was made for, from its step key ({{node.name}}) and its
// attempt ({{retries}}). Argo substitutes {{node.name}} before it wraps a template that has a
// retryStrategy in a Retry node, so the key names that parent, which stays Running while any
// attempt runs; attempt N is the parent's child named key(N), which is where {{retries}} is N
// (workflow/controller/operator.go, executeTemplate, Argo v3.7.3). A child not (yet) listed
// falls back to the parent, which is finished only once every attempt is.
func stepNode(wf *wfv1.Workflow, key, attempt string) *wfv1.NodeStatus {
	node := wf.Status.Nodes.FindByName(key)
	if node == nil || node.Type != wfv1.NodeTypeRetry || attempt == "" {
		return node
	}
	if child := wf.Status.Nodes.FindByName(retryChildName(key, attempt)); child != nil {
		return child
	}
	return node
}

// engineAttempt is the {{retries}} a TrainJob was made for. Under the step's own retry block its
// trainstep.dev/attempt is {{retries}} × (limit+1) + retry, and trainstep.dev/engine-attempt
// says which {{retries}}; a job without that label (no retry block, or made before the label
// existed) is of the attempt it is labelled with.
func engineAttempt(tj *trainer.TrainJob) string {
	if a, ok := tj.Labels[trainjob.LabelEngineAttempt]; ok {
		return a
	}
	return tj.Labels[trainjob.LabelAttempt]
}

// retryChildName is the name Argo gives attempt N of a Retry node: parent(N).
func retryChildName(parent, attempt string) string { return parent + "(" + attempt + ")" }
