// Package tekton is trainstep's Tekton face: a controller that runs tekton.dev/v1beta1
// CustomRuns naming trainstep's apiVersion and kind as Kubeflow Trainer TrainJobs, through the
// core's one path (params → step → plan → TrainJob → submit → observe → results).
//
// It is a controller-runtime controller over trainstep's own copy of the CustomRun JSON
// (api/v1beta1), not a knative one over Tekton's Go types: the contract is the JSON and the
// status subresource, and this keeps knative's 600+ packages out of the executor. The knative
// generated reconciler's generation-reset trap does not arise, and terminal is final anyway.
package tekton

import (
	"context"
	"fmt"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trainstep/trainstep/core/lifecycle"
	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/trainers"
	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/managed"
	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
)

// Name is the controller's name: in logs, metrics, Events and the leader election lease.
const Name = "trainstep-tekton"

// Options configure the controller. The zero value is usable after Default.
type Options struct {
	// MetricsAddr serves /metrics ("0" turns it off).
	MetricsAddr string
	// ProbeAddr serves /healthz and /readyz ("0" turns it off).
	ProbeAddr string
	// PprofAddr serves Go's /debug/pprof profiles ("": none).
	PprofAddr string
	// LeaderElection makes only one replica reconcile at a time.
	LeaderElection          bool
	LeaderElectionNamespace string
	// Namespaces limits the CustomRuns (and TrainJobs) watched; empty means all.
	Namespaces []string
	// Workers is how many CustomRuns are reconciled at once.
	Workers int
	// QPS and Burst bound the controller's client (client-go's default of 5 QPS would add
	// 200 ms to every status write under load).
	QPS   float32
	Burst int

	// Test seams: where failing pods' logs come from (the kubelet through the apiserver when
	// nil), the clock, and where metrics register (controller-runtime's registry when nil).
	Logs       trainjob.LogSource
	Clock      clock.PassiveClock
	Registerer prometheus.Registerer
}

// Default fills in the unset fields.
func (o *Options) Default() {
	if o.MetricsAddr == "" {
		o.MetricsAddr = ":8080"
	}
	if o.ProbeAddr == "" {
		o.ProbeAddr = ":8081"
	}
	if o.Workers == 0 {
		o.Workers = 8
	}
	if o.QPS == 0 {
		o.QPS = 50
	}
	if o.Burst == 0 {
		o.Burst = 100
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Registerer == nil {
		o.Registerer = ctrlmetrics.Registry
	}
}

// Validate reports settings that cannot work.
func (o Options) Validate() error {
	var errs field.ErrorList
	if o.Workers < 1 {
		errs = append(errs, field.Invalid(field.NewPath("workers"), o.Workers, "must be 1 or more"))
	}
	if o.QPS < 0 || o.Burst < 0 {
		errs = append(errs, field.Invalid(field.NewPath("qps"), o.QPS, "QPS and burst must not be negative"))
	}
	return errs.ToAggregate()
}

// Scheme knows the types the controller reads and writes.
func Scheme() (*runtime.Scheme, error) {
	return trainjob.NewScheme(v1beta1.AddToScheme)
}

// New builds a manager running the controller, with leader election, probes and metrics as
// the options say. Start it with mgr.Start(ctx).
func New(cfg *rest.Config, opts Options) (manager.Manager, error) {
	opts.Default()
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("invalid Tekton controller options: %w", err)
	}
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = opts.QPS, opts.Burst
	// What the cluster serves decides what is cached, so it is read before the cache is built.
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating the client that reads the cluster's APIs at start: %w", err)
	}
	log := ctrl.Log.WithName(Name)
	ownPods, err := podsLabelled(c)
	if err != nil {
		log.Info("caching every JobSet pod: cannot tell whether the Trainer puts trainstep's labels on its pods", "error", err.Error())
	}
	kueue := workloadsServed(c.RESTMapper(), log)
	cacheOpts := cache.Options{
		// Nothing cached keeps its managedFields; CustomRuns, TrainJobs and pods keep only what
		// the reconciler reads (trim.go, trainjob.TrimPod): the cache holds one of each per step.
		DefaultTransform: trainjob.StripManagedFields,
		ByObject: map[client.Object]cache.ByObject{
			&v1beta1.CustomRun{}: {Transform: trimCustomRun},
			// Only trainstep's own Tekton TrainJobs, and only pods JobSet made.
			&trainer.TrainJob{}: {Label: labels.SelectorFromSet(labels.Set{
				trainjob.LabelManagedBy: trainjob.ManagedByValue, trainjob.LabelEngine: Engine}), Transform: trainjob.TrimTrainJob},
			&corev1.Pod{}: {Label: podSelector(ownPods), Transform: trainjob.TrimPod},
			// Only Warning Events, and of each only what Decide reads: the Trainer's, JobSet's, the
			// Job controller's and the kubelet's word on why a TrainJob does not start (no one
			// selector names the JobSets, Jobs and pods they are about).
			&corev1.Event{}: {Field: trainjob.EventSelector(), Transform: trainjob.TrimEvent},
		},
	}
	if kueue {
		cacheOpts.ByObject[newWorkload()] = workloadCache()
	}
	mgr, err := managed.New(cfg, scheme, cacheOpts, managed.Options{Name: Name, Namespaces: opts.Namespaces,
		MetricsAddr: opts.MetricsAddr, ProbeAddr: opts.ProbeAddr, PprofAddr: opts.PprofAddr,
		LeaderElection: opts.LeaderElection, LeaderElectionNamespace: opts.LeaderElectionNamespace})
	if err != nil {
		return nil, err
	}
	if err := setup(mgr, opts, ownPods, kueue); err != nil {
		return nil, err
	}
	return mgr, nil
}

// podsLabelTimeout bounds the one read of the TrainJob CRD at start.
const podsLabelTimeout = 30 * time.Second

// podsLabelled reports whether the installed Trainer puts trainstep's pod labels
// (trainjob.PodLabels) on the pods of the TrainJobs trainstep submits: it has a pod-template
// mechanism (v2.1+). On Trainer v2.0, or when the CRD cannot be read, the controller caches every
// JobSet pod of the namespaces it watches, as it must to see its own.
func podsLabelled(c client.Reader) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), podsLabelTimeout)
	defer cancel()
	api, err := trainjob.DetectAPI(ctx, c)
	if err != nil {
		return false, err
	}
	return api.PodMechanism != "", nil
}

// podSelector selects the pods the controller caches: JobSet's, and with ownPods only this
// face's — trainstep labels the pods of its TrainJobs through their pod template
// (trainjob.PodLabels) — not every JobSet pod of the namespaces watched.
func podSelector(ownPods bool) labels.Selector {
	sel := labels.NewSelector().Add(requirement(trainjob.LabelJobSetName, selection.Exists))
	if ownPods {
		sel = sel.Add(requirement(trainjob.LabelManagedBy, selection.Equals, trainjob.ManagedByValue),
			requirement(trainjob.LabelEngine, selection.Equals, Engine))
	}
	return sel
}

func requirement(key string, op selection.Operator, values ...string) labels.Requirement {
	req, err := labels.NewRequirement(key, op, values)
	if err != nil {
		panic(err) // constant, valid keys and values
	}
	return *req
}

// Setup adds the CustomRun controller to a manager whose scheme is Scheme(). The manager's
// cache is the caller's: the controller assumes it holds every JobSet pod it may need, and
// caches Kueue's Workloads, when served, as that cache is configured.
func Setup(mgr manager.Manager, opts Options) error {
	return setup(mgr, opts, false, workloadsServed(mgr.GetRESTMapper(), mgr.GetLogger()))
}

// setup adds the controller; ownPods says the pod cache holds only pods carrying trainstep's
// labels, so a TrainJob made before they were set has pods only the apiserver shows; kueue says
// Kueue's Workloads are served (workloadsServed), so the controller watches them.
func setup(mgr manager.Manager, opts Options, ownPods, kueue bool) error {
	opts.Default()
	m := newMetrics()
	if err := m.register(opts.Registerer); err != nil {
		return fmt.Errorf("registering the Tekton controller's metrics: %w", err)
	}
	logs := opts.Logs
	if logs == nil {
		kube, err := kubernetesClient(mgr.GetConfig())
		if err != nil {
			return err
		}
		logs = trainjob.KubeletLogs{Client: kube}
	}
	r := &Reconciler{
		client:    mgr.GetClient(),
		apiReader: mgr.GetAPIReader(),
		clock:     opts.Clock,
		recorder:  mgr.GetEventRecorder(Name),
		metrics:   m,
		ownPods:   ownPods,
		writes:    newWrites(),
	}
	r.engine = r.newEngine(mgr, logs)
	// A TrainJob's pods and Events are looked up by name, not by scanning the namespace.
	if err := trainjob.RegisterIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if err := r.warmInformers(mgr.GetCache()); err != nil {
		return err
	}
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool {
		run, ok := o.(*v1beta1.CustomRun)
		return ok && run.RefersTo(APIVersion, Kind)
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&v1beta1.CustomRun{}, builder.WithPredicates(ours)).
		// Every CustomRun that owns a TrainJob, not only its controller: the steps that follow
		// another's job (the step cache's in-flight steps) are woken by it too.
		Watches(&trainer.TrainJob{}, handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &v1beta1.CustomRun{})).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.podOwner)).
		Watches(&corev1.Event{}, handler.EnqueueRequestsFromMapFunc(r.eventOwner))
	b, r.workloads = r.watchWorkloads(mgr, b, kueue)
	if err := b.WithOptions(controller.Options{MaxConcurrentReconciles: opts.Workers}).Complete(r); err != nil {
		return fmt.Errorf("setting up the CustomRun controller: %w", err)
	}
	return nil
}

// warmInformers starts the informers the first step needs before it comes: the runtimes' (so the
// first plan waits for no cold list) and the TrainJobs', whose every add or update tells the
// engine a create in flight has landed (see missing).
func (r *Reconciler) warmInformers(c cache.Cache) error {
	for _, kind := range []string{runtimes.ClusterKind, runtimes.NamespacedKind} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: runtimes.Group, Version: runtimes.Version, Kind: kind})
		if _, err := c.GetInformer(context.Background(), u); err != nil {
			return fmt.Errorf("watching %ss: %w", kind, err)
		}
	}
	tjs, err := c.GetInformer(context.Background(), &trainer.TrainJob{})
	if err != nil {
		return fmt.Errorf("watching TrainJobs: %w", err)
	}
	if _, err := tjs.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    r.engine.Creates.Seen,
		UpdateFunc: func(_, obj any) { r.engine.Creates.Seen(obj) },
	}); err != nil {
		return fmt.Errorf("watching TrainJobs: %w", err)
	}
	return nil
}

// newEngine is the core's lifecycle on the manager's cache: TrainJobs, pods, Events and
// Workloads read from it, the apiserver asked only what a lagging cache cannot answer.
func (r *Reconciler) newEngine(mgr manager.Manager, logs trainjob.LogSource) *lifecycle.Engine {
	e := &lifecycle.Engine{
		Cluster: lifecycle.Cluster{
			Cache: mgr.GetClient(), Indexed: true, API: mgr.GetAPIReader(), Writer: mgr.GetClient(),
			Snapshot: r.snapshot, Logs: logs, Creates: lifecycle.NewCreates(),
		},
		// The cache, not the manager's client: that client reads unstructured objects (runtimes are
		// read unstructured) straight from the apiserver, a LIST of each kind per plan.
		Planner: &trainjob.Planner{Trainers: trainers.Builtin(), Runtimes: runtimes.ClusterSource{Reader: mgr.GetCache()},
			Detector: &trainjob.APIDetector{Reader: mgr.GetAPIReader()}},
		Tails: trainjob.NewTails(),
		Clock: r.clock,
		RBAC:  "manifests/tekton/rbac.yaml: kubectl apply -k manifests/tekton, then rerun the PipelineRun",
		Warn: func(ctx context.Context, msg string, err error) {
			ctrl.LoggerFrom(ctx).Error(err, msg)
		},
	}
	if r.ownPods {
		e.PodsBeforeVerdict = r.unlabelledPods
	}
	return e
}

// podOwner maps a JobSet pod to the CustomRuns that own its TrainJob (pods carry the TrainJob
// name as jobset-name; the TrainJob carries the owner references to the CustomRuns: its
// maker's, and those of the steps that follow it).
func (r *Reconciler) podOwner(ctx context.Context, o client.Object) []reconcile.Request {
	return r.trainJobOwner(ctx, o.GetNamespace(), o.GetLabels()[trainjob.LabelJobSetName])
}

// eventOwner maps an Event about a TrainJob, its JobSet, Jobs or pods to the CustomRuns that
// own the TrainJob: each TrainJob it may be about (trainjob.EventTrainJobs) is looked up in
// the cache, and Events Decide does not read map to none.
func (r *Reconciler) eventOwner(ctx context.Context, o client.Object) []reconcile.Request {
	e, ok := o.(*corev1.Event)
	if !ok {
		return nil
	}
	var reqs []reconcile.Request
	for _, name := range trainjob.EventTrainJobs(e) {
		reqs = append(reqs, r.trainJobOwner(ctx, e.Namespace, name)...)
	}
	return reqs
}

func (r *Reconciler) trainJobOwner(ctx context.Context, namespace, name string) []reconcile.Request {
	if name == "" {
		return nil
	}
	tj := &trainer.TrainJob{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, tj); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, ref := range tj.OwnerReferences {
		if ref.Kind == "CustomRun" && ref.APIVersion == v1beta1.GroupVersion.String() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: tj.Namespace, Name: ref.Name}})
		}
	}
	return reqs
}
