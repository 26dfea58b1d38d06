package argo

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/lifecycle"
	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/trainers"
	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/restmapping"
)

// Plugin is the executor plugin: an HTTP face over an informer cache of the namespace's
// TrainJobs, their pods, the runtimes and the Workflows.
type Plugin struct {
	opts    Options
	log     *slog.Logger
	cache   cache.Cache
	api     client.Client
	reader  cacheFirst // the cache, falling back to the apiserver for objects it has not seen yet
	engine  *lifecycle.Engine
	tokens  *tokenFile
	metrics *metrics
	clock   clock.Clock
	held    chan struct{}
	waiters *waiters
	reaper  *reaper
	// workloads are Kueue's Workloads, read only while a queued step needs one (workloads.go).
	workloads *workloads

	metricsAddr atomic.Value // string: the bound metrics address

	createdMu sync.Mutex
	created   map[types.NamespacedName]struct{} // TrainJobs this process created
}

// New builds the plugin from a cluster config. It reads the token file once, so a sidecar that
// cannot read it fails at start with a message naming the fix.
func New(cfg *rest.Config, opts Options) (*Plugin, error) {
	opts.Default()
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("invalid Argo plugin options: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = opts.QPS, opts.Burst
	tokens, err := newTokenFile(opts.TokenFile)
	if err != nil {
		return nil, err
	}
	scheme, err := trainjob.NewScheme(wfv1.AddToScheme)
	if err != nil {
		return nil, err
	}
	conn, err := connect(cfg, scheme)
	if err != nil {
		return nil, err
	}
	httpClient, mapper, api := conn.httpClient, conn.mapper, conn.api
	owner, ownPods, err := scope(api, opts)
	if err != nil {
		return nil, err
	}
	copts := cacheOptions(scheme, opts, owner, ownPods)
	copts.HTTPClient, copts.Mapper = httpClient, mapper
	c, err := cache.New(cfg, copts)
	if err != nil {
		return nil, fmt.Errorf("building the informer cache: %w", err)
	}
	logs, err := logSource(cfg, opts.Logs)
	if err != nil {
		return nil, err
	}
	p := &Plugin{
		opts:    opts,
		log:     opts.Logger,
		cache:   c,
		api:     api,
		reader:  cacheFirst{cache: c, api: api},
		tokens:  tokens,
		metrics: newMetrics(),
		clock:   clock.RealClock{},
		held:    make(chan struct{}, max(opts.MaxHeld, 0)),
		waiters: newWaiters(),
		created: map[types.NamespacedName]struct{}{},
	}
	p.engine = p.newEngine(c, api, logs)
	// A cache of the workflow's own TrainJobs lacks one another workflow's step made, which a
	// step of this one may follow (docs/cache.md, in-flight steps).
	p.engine.Scoped = owner != ""
	// A TrainJob's pods and Events are looked up by name, not by scanning the namespace.
	if err := trainjob.RegisterIndexes(context.Background(), c); err != nil {
		return nil, err
	}
	p.reaper = newReaper(opts.Namespace, c, api, opts.Logger)
	dyn, err := dynamic.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster at %s: %w", cfg.Host, err)
	}
	p.workloads = newWorkloads(dyn, opts.Namespace, opts.Logger, p.syncWait(), func(o any) { p.waiters.notifyFor(o, workloadTrainJobs) })
	p.metrics.registry.MustRegister(
		cachedObjects(c, "trainstep_argo_cached_trainjobs", "TrainJobs held in the plugin's informer cache (with --workflow, only that workflow's).", &trainer.TrainJobList{}),
		cachedObjects(c, "trainstep_argo_cached_pods", "JobSet pods held in the plugin's informer cache (with --workflow on Trainer v2.1+, only that workflow's).", &corev1.PodList{}))
	return p, nil
}

// connection is one HTTP client and one memoized mapper for the client and the cache: the cache
// asks the mapper on every read (see package restmapping).
type connection struct {
	httpClient *http.Client
	mapper     apimeta.RESTMapper
	api        client.Client
}

func connect(cfg *rest.Config, scheme *runtime.Scheme) (connection, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return connection{}, fmt.Errorf("connecting to the cluster at %s: %w", cfg.Host, err)
	}
	mapper, err := restmapping.NewDynamic(cfg, httpClient)
	if err != nil {
		return connection{}, fmt.Errorf("connecting to the cluster at %s: %w", cfg.Host, err)
	}
	api, err := client.New(cfg, client.Options{Scheme: scheme, HTTPClient: httpClient, Mapper: mapper})
	if err != nil {
		return connection{}, fmt.Errorf("connecting to the cluster at %s: %w", cfg.Host, err)
	}
	return connection{httpClient: httpClient, mapper: mapper, api: api}, nil
}

// scope is what narrows the sidecar's cache: its Workflow's UID (with --workflow) and whether the
// Trainer labels trainstep's pods, so only that workflow's are cached.
func scope(api client.Client, opts Options) (owner types.UID, ownPods bool, err error) {
	if opts.Workflow == "" {
		return "", false, nil
	}
	if owner, err = workflowUID(api, opts.Namespace, opts.Workflow); err != nil {
		return "", false, err
	}
	if ownPods, err = podsLabelled(api); err != nil {
		opts.Logger.Warn("caching every JobSet pod of the namespace: cannot tell whether the Trainer labels trainstep's pods", "error", err)
	}
	return owner, ownPods, nil
}

// logSource is logs, else the failing nodes' log tails read through the apiserver (kubelet).
func logSource(cfg *rest.Config, logs trainjob.LogSource) (trainjob.LogSource, error) {
	if logs != nil {
		return logs, nil
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster at %s: %w", cfg.Host, err)
	}
	return trainjob.KubeletLogs{Client: kube}, nil
}

// cacheOptions keeps the cache to what the plugin reads: its namespace's trainstep TrainJobs
// made by this face (only its own workflow's, by the owner-uid label, when the sidecar knows its
// workflow), the pods of its JobSets (its workflow's too, when ownPods: the Trainer puts
// trainjob.PodLabels on them), the namespace's Warning Events (the Trainer's, JobSet's, the Job
// controller's and the kubelet's word on why a TrainJob does not start: no one selector names
// their objects), the runtimes and the Workflows (one, if named). Every object is cached without
// its managedFields, pods only with what Observe reads (trainjob.TrimPod), Events only with what
// Decide reads (trainjob.TrimEvent).
func cacheOptions(scheme *runtime.Scheme, opts Options, owner types.UID, ownPods bool) cache.Options {
	jobs := labels.Set{trainjob.LabelManagedBy: trainjob.ManagedByValue, trainjob.LabelEngine: Engine}
	if owner != "" {
		// The label as Identity writes it (a UID is a valid label value, kept as it is).
		jobs[trainjob.LabelOwnerUID] = trainjob.Identity{OwnerUID: string(owner)}.Labels()[trainjob.LabelOwnerUID]
	}
	podReq, _ := labels.NewRequirement(trainjob.LabelJobSetName, selection.Exists, nil)
	pods := labels.NewSelector().Add(*podReq)
	if ownPods {
		for k, v := range jobs {
			r, _ := labels.NewRequirement(k, selection.Equals, []string{v})
			pods = pods.Add(*r)
		}
	}
	wf := cache.ByObject{Transform: trimWorkflow}
	if opts.Workflow != "" {
		wf.Field = fields.OneTermEqualSelector("metadata.name", opts.Workflow)
	}
	return cache.Options{
		Scheme:            scheme,
		DefaultNamespaces: map[string]cache.Config{opts.Namespace: {}},
		DefaultTransform:  trainjob.StripManagedFields,
		ByObject: map[client.Object]cache.ByObject{
			&trainer.TrainJob{}: {Label: labels.SelectorFromSet(jobs), Transform: trainjob.TrimTrainJob},
			&corev1.Pod{}:       {Label: pods, Transform: trainjob.TrimPod},
			&wfv1.Workflow{}:    wf,
			&corev1.Event{}:     {Field: trainjob.EventSelector(), Transform: trainjob.TrimEvent},
		},
	}
}

// newEngine is the core's lifecycle on the plugin's caches: TrainJobs (read in place, never
// copied), pods and Events from the informers, Workloads from workloads.go; the apiserver is
// asked only what a lagging cache cannot answer.
func (p *Plugin) newEngine(c cache.Cache, api client.Client, logs trainjob.LogSource) *lifecycle.Engine {
	return &lifecycle.Engine{
		Cluster: lifecycle.Cluster{
			Cache: c, Indexed: true, Shared: true, API: api, Writer: api, Logs: logs, Creates: lifecycle.NewCreates(),
			Snapshot: func(ctx context.Context, tj *trainer.TrainJob) (trainjob.Snapshot, error) {
				return p.snapshot(ctx, tj), nil
			},
		},
		Planner: &trainjob.Planner{Trainers: trainers.Builtin(), Runtimes: runtimes.ClusterSource{Reader: c}, Detector: &trainjob.APIDetector{Reader: api}},
		Tails:   trainjob.NewTails(),
		Clock:   p.clock,
		RBAC:    "manifests/argo/rbac.yaml: kubectl apply -f manifests/argo/rbac.yaml",
		// A call answers the agent; the start record need not hold it.
		RecordStartAside: true,
		Warn: func(_ context.Context, msg string, err error) {
			p.log.Warn(msg, "error", err)
		},
	}
}

// Start runs the cache and the reaper until ctx ends; Handler serves meanwhile. It returns once
// the informers are registered; Synced reports when they have listed.
func (p *Plugin) Start(ctx context.Context) error {
	inf, err := p.cache.GetInformer(ctx, &trainer.TrainJob{})
	if err != nil {
		return fmt.Errorf("watching TrainJobs: %w", err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { p.engine.Creates.Seen(o); p.waiters.notify(o) },
		UpdateFunc: func(_, o any) { p.engine.Creates.Seen(o); p.waiters.notify(o) },
		DeleteFunc: func(o any) { p.waiters.notify(o) },
	}); err != nil {
		return fmt.Errorf("watching TrainJobs: %w", err)
	}
	// A held call is also woken by its TrainJob's pods (the JobSet label names the TrainJob) and
	// the Events of the TrainJob and what it owns: the scheduler's, a failing node's or a refused
	// object's news comes from them.
	for obj, keys := range map[client.Object]func(client.Object) []string{
		&corev1.Pod{}: func(o client.Object) []string { return []string{o.GetLabels()[trainjob.LabelJobSetName]} },
		&corev1.Event{}: func(o client.Object) []string {
			if e, ok := o.(*corev1.Event); ok {
				return trainjob.EventTrainJobs(e)
			}
			return nil
		},
	} {
		inf, err := p.cache.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("watching %T: %w", obj, err)
		}
		notify := func(o any) { p.waiters.notifyFor(o, keys) }
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    notify,
			UpdateFunc: func(_, o any) { notify(o) },
			DeleteFunc: notify,
		}); err != nil {
			return fmt.Errorf("watching %T: %w", obj, err)
		}
	}
	if err := p.reaper.register(ctx); err != nil {
		return err
	}
	p.workloads.run(ctx)
	// Runtimes are listed unstructured; asking for the informers now makes the first step cost no
	// cold start.
	for _, kind := range []string{runtimes.ClusterKind, runtimes.NamespacedKind} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: runtimes.Group, Version: runtimes.Version, Kind: kind})
		if _, err := p.cache.GetInformer(ctx, u); err != nil {
			return fmt.Errorf("watching %ss: %w", kind, err)
		}
	}
	go func() {
		if err := p.cache.Start(ctx); err != nil {
			p.log.Error("the informer cache stopped", "error", err)
		}
	}()
	go p.reaper.run(ctx)
	return nil
}

// Synced reports whether the informers have listed.
func (p *Plugin) Synced(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	return p.cache.WaitForCacheSync(ctx)
}

// waitSynced waits up to d for the cache's first list.
func (p *Plugin) waitSynced(ctx context.Context, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return p.cache.WaitForCacheSync(ctx)
}

// Sweep deletes the unfinished TrainJobs of workflows that are stopping or done, reading straight
// from the apiserver. Run it on SIGTERM: the agent pod is deleted when its workflow completes.
func (p *Plugin) Sweep(ctx context.Context) error { return p.reaper.sweep(ctx) }

// workflowOwner makes the Workflow own the TrainJob. No blockOwnerDeletion: that would need
// update on workflows/finalizers.
func workflowOwner(name, uid string) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: wfv1.SchemeGroupVersion.String(), Kind: "Workflow", Name: name, UID: types.UID(uid)}
}

// cacheFirst reads from the cache and asks the apiserver only for an object the cache has not
// seen (one just created by a racing call), so Submit's create-or-get holds on a lagging cache.
type cacheFirst struct {
	cache client.Reader
	api   client.Client
}

var _ trainjob.Client = cacheFirst{}

func (c cacheFirst) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := c.cache.Get(ctx, key, obj, opts...)
	if apierrors.IsNotFound(err) {
		return c.api.Get(ctx, key, obj, opts...)
	}
	return err
}

func (c cacheFirst) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.cache.List(ctx, list, opts...)
}

func (c cacheFirst) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.api.Create(ctx, obj, opts...)
}

// waiters wakes held calls when their TrainJob changes.
type waiters struct {
	mu sync.Mutex
	m  map[types.NamespacedName]map[chan struct{}]struct{}
}

func newWaiters() *waiters { return &waiters{m: map[types.NamespacedName]map[chan struct{}]struct{}{}} }

func (w *waiters) add(key types.NamespacedName) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m[key] == nil {
		w.m[key] = map[chan struct{}]struct{}{}
	}
	w.m[key][ch] = struct{}{}
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.m[key], ch)
		if len(w.m[key]) == 0 {
			delete(w.m, key)
		}
	}
}

func (w *waiters) notify(obj any) {
	w.notifyFor(obj, func(o client.Object) []string { return []string{o.GetName()} })
}

// notifyFor wakes the calls held on the TrainJobs that names(obj) names, in obj's namespace.
func (w *waiters) notifyFor(obj any, names func(client.Object) []string) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o, ok := obj.(client.Object)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, name := range names(o) {
		if name == "" {
			continue
		}
		for ch := range w.m[types.NamespacedName{Namespace: o.GetNamespace(), Name: name}] {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}
