package lifecycle

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/trainstep/trainstep/core/stepcache"
	"github.com/trainstep/trainstep/core/trainjob"
)

// The model checker's world (model_test.go): one sequence's cluster. The apiserver is
// controller-runtime's fake client, behind interceptors that fail requests as the sequence asks
// and log every write with its time and the step whose look made it. The faces read TrainJobs
// from an informer the world keeps (jobs, mirrored after every write), which may lag (frozen)
// and which the Argo and Tekton faces read trimmed. The Trainer, Kueue and people are the
// model's own events (model_trainer_test.go), written without faults; what they did is the
// ground truth (truth) the invariants judge the engine by.

// modelNamespace is where every step of the model runs.
const modelNamespace = "ns"

// modelStart is when every sequence begins: whole seconds, as every time the API keeps.
var modelStart = time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)

// world is one sequence's cluster and what it saw.
type world struct {
	ctx     context.Context
	clock   *clocktesting.FakeClock
	planner *trainjob.Planner
	// raw is the fake apiserver; api is it with the sequence's faults and the write log, what
	// every engine uses.
	raw, api client.WithWatch
	// jobs are the apiserver's TrainJobs, each replaced (never changed) at every write; frozen is
	// what the faces' informer shows while it lags (lagFor events more).
	jobs   map[string]*trainer.TrainJob
	frozen map[string]*trainer.TrainJob
	lagFor int
	// store is the step cache's ConfigMap data as last written.
	store map[string]string
	pods  map[string][]corev1.Pod
	truth map[string]*jobTruth
	// made lists the TrainJobs in the order they were created.
	made   []string
	faults []*fault
	steps  []*modelStep
	writes []write
	looks  []lookRecord
	// actor is the step whose look is under way (-1: none), and lookFaults the faults its
	// requests met.
	actor      int
	lookFaults []string
	uids       int
}

// jobTruth is what the world knows of a TrainJob: who made it and what the Trainer, Kueue and
// people did to it.
type jobTruth struct {
	name    string
	step    int // whose look created it
	key     string
	retryOf string
	// attempt is its TrainJob attempt (trainstep.dev/attempt), faceAttempt the face's attempt it
	// belongs to, and retry which of that attempt's own retries it is.
	attempt, faceAttempt, retry int
	created                     time.Time
	// running says every node runs now; started is when they first all ran.
	running bool
	started time.Time
	// suspended says Kueue holds it now; resumed is its last re-admission.
	suspended bool
	resumed   time.Time
	// resumedRun says its rank 0 posts the checkpoint it resumed from as it starts.
	resumedRun bool
	// reported is the function's last report (zero: it never reported).
	reported time.Time
	// waiting is why its pods wait to start ("" when nothing says).
	waiting string
	// ended is when its Complete or Failed condition came; class is its first failure's.
	ended     time.Time
	succeeded bool
	class     trainjob.FailureClass
	gone      time.Time
	// undeletable says a delete of it was forbidden: trainstep says so and leaves it to its user.
	undeletable bool
}

// write is one write that reached the apiserver.
type write struct {
	at     time.Time
	actor  int // the step whose look wrote it, -1 for the world
	look   int // which look (an index of world.looks) when actor is a step
	verb   string
	name   string
	before *trainer.TrainJob // as it was, for a delete or patch
	after  *trainer.TrainJob // as it is, for a create or patch
	// store, jobs and truth are the step cache, the TrainJobs and their truth just before a
	// create or delete.
	store map[string]string
	jobs  map[string]*trainer.TrainJob
	truth map[string]jobTruth
}

// lookRecord is one look of a step's face.
type lookRecord struct {
	step, attempt int
	start, end    time.Time
	status        Status
	stop          bool
	// recorded is the face's record before the look, and before the world as it was then: the
	// step cache, the TrainJobs and their truth.
	recorded string
	before   write
	faults   []string
	lagging  bool
	// live are the step's live TrainJobs right after the look (liveJobsOf).
	live []string
}

// clean says the look met neither a lagging cache nor a fault but on a create: what it decided
// it could carry out.
func (l lookRecord) clean() bool {
	if l.lagging {
		return false
	}
	for _, f := range l.faults {
		if !isCreateFault(f) {
			return false
		}
	}
	return true
}

// newWorld makes an empty cluster for one sequence.
func newWorld(ctx context.Context, scheme *runtime.Scheme) *world {
	w := &world{ctx: ctx, clock: clocktesting.NewFakeClock(modelStart), jobs: map[string]*trainer.TrainJob{},
		store: map[string]string{}, pods: map[string][]corev1.Pod{}, truth: map[string]*jobTruth{}, actor: -1}
	// The plain object tracker: the field-managed one costs milliseconds per client, and no
	// write here is a server-side apply.
	tracker := k8stesting.NewObjectTracker(scheme, serializer.NewCodecFactory(scheme).UniversalDecoder())
	w.raw = fake.NewClientBuilder().WithScheme(scheme).WithObjectTracker(tracker).Build()
	w.api = interceptor.NewClient(w.raw, interceptor.Funcs{
		Get: w.get, Create: w.create, Delete: w.delete, Patch: w.patch, Update: w.update,
	})
	return w
}

// view is the TrainJobs as the faces' informer has them.
func (w *world) view() map[string]*trainer.TrainJob {
	if w.lagFor > 0 {
		return w.frozen
	}
	return w.jobs
}

// lag freezes the informer for n events (endEvent counts them down).
func (w *world) lag(n int) {
	if w.lagFor == 0 {
		w.frozen = maps.Clone(w.jobs)
	}
	w.lagFor = max(w.lagFor, n)
}

// endEvent ends an event: a lag that has lasted its events ends, and every face's watch shows
// what it missed.
func (w *world) endEvent() {
	if w.lagFor == 0 {
		return
	}
	w.lagFor--
	if w.lagFor == 0 {
		w.frozen = nil
		for _, name := range slices.Sorted(maps.Keys(w.jobs)) {
			w.delivered(w.jobs[name])
		}
	}
}

// delivered is the faces' TrainJob informer showing tj: each face's record of creates in
// flight lets go of it (Creates.Seen).
func (w *world) delivered(tj *trainer.TrainJob) {
	if w.lagFor > 0 {
		return
	}
	for _, x := range w.steps {
		if x.engine != nil {
			x.engine.Creates.Seen(tj)
		}
	}
}

// mirror records tj as the apiserver now has it.
func (w *world) mirror(tj *trainer.TrainJob) {
	tj = tj.DeepCopy()
	w.jobs[tj.Name] = tj
	w.delivered(tj)
}

// kindOf names what a request is about, for the faults.
func kindOf(obj runtime.Object) string {
	switch obj.(type) {
	case *trainer.TrainJob:
		return kindTrainJob
	case *corev1.ConfigMap:
		return kindStore
	}
	return "other"
}

func (w *world) get(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := w.inject(verbGet, kindOf(obj), false); err != nil {
		return err
	}
	return c.Get(ctx, key, obj, opts...)
}

func (w *world) create(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
	if err := w.inject(verbCreate, kindOf(obj), false); err != nil {
		return err
	}
	tj, isJob := obj.(*trainer.TrainJob)
	var before write
	if isJob {
		// The apiserver stamps these; the fake client does not.
		w.uids++
		tj.CreationTimestamp, tj.UID = metav1.NewTime(w.clock.Now()), types.UID(fmt.Sprintf("uid-%d", w.uids))
		before = w.snapshot()
	}
	if err := c.Create(ctx, obj, opts...); err != nil {
		return err
	}
	if isJob {
		before.verb, before.name, before.after = verbCreate, tj.Name, tj.DeepCopy()
		w.created(tj)
		w.logWrite(before)
	} else {
		w.stored(obj)
	}
	return w.inject(verbCreate, kindOf(obj), true) // an answer lost after the write
}

func (w *world) delete(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
	if err := w.inject(verbDelete, kindOf(obj), false); err != nil {
		if t := w.truth[obj.GetName()]; t != nil && apierrors.IsForbidden(err) {
			t.undeletable = true
		}
		return err
	}
	before := w.snapshot()
	old := w.jobs[obj.GetName()]
	if err := c.Delete(ctx, obj, opts...); err != nil {
		return err
	}
	if _, ok := obj.(*trainer.TrainJob); ok && old != nil {
		before.verb, before.name, before.before = verbDelete, old.Name, old
		w.gone(old.Name)
		w.logWrite(before)
	}
	return nil
}

func (w *world) patch(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := w.inject(verbPatch, kindOf(obj), false); err != nil {
		return err
	}
	old := w.jobs[obj.GetName()]
	if err := c.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	if tj, ok := obj.(*trainer.TrainJob); ok {
		w.mirror(tj)
		w.logWrite(write{verb: verbPatch, name: tj.Name, before: old, after: w.jobs[tj.Name]})
	}
	return nil
}

func (w *world) update(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
	if err := w.inject(verbUpdate, kindOf(obj), false); err != nil {
		return err
	}
	if err := c.Update(ctx, obj, opts...); err != nil {
		return err
	}
	w.stored(obj)
	return nil
}

// stored mirrors the step cache's ConfigMap after a write.
func (w *world) stored(obj client.Object) {
	if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == stepcache.ConfigMapName {
		w.store = maps.Clone(cm.Data)
	}
}

// snapshot is the step cache and the jobs' truth as they are now, for a write's judges.
func (w *world) snapshot() write {
	truth := make(map[string]jobTruth, len(w.truth))
	for name, t := range w.truth {
		truth[name] = *t
	}
	return write{store: maps.Clone(w.store), jobs: maps.Clone(w.jobs), truth: truth}
}

func (w *world) logWrite(wr write) {
	wr.at, wr.actor, wr.look = w.clock.Now(), w.actor, len(w.looks)
	w.writes = append(w.writes, wr)
}

// created is a TrainJob the apiserver has now: the Trainer makes its pods, waiting.
func (w *world) created(tj *trainer.TrainJob) {
	w.mirror(tj)
	if !slices.Contains(w.made, tj.Name) { // a name made again once someone deleted the first
		w.made = append(w.made, tj.Name)
	}
	t := &jobTruth{name: tj.Name, step: w.actor, key: tj.Annotations[stepcache.AnnotationKey],
		retryOf: tj.Annotations[annotationRetryOf], created: tj.CreationTimestamp.Time}
	_, _ = fmt.Sscan(tj.Labels[trainjob.LabelAttempt], &t.attempt)
	t.faceAttempt = t.attempt
	if v, ok := tj.Labels[trainjob.LabelEngineAttempt]; ok {
		_, _ = fmt.Sscan(v, &t.faceAttempt)
	}
	if x := w.stepOf(w.actor); x != nil {
		t.retry = t.attempt - t.faceAttempt*(x.spec.limit+1)
		t.resumedRun = x.spec.spec.Checkpoint != nil && t.attempt > 0
	}
	w.truth[tj.Name] = t
	w.pods[tj.Name] = waitingPods(tj.Name, "")
}

// gone is a TrainJob deleted: its pods go with it.
func (w *world) gone(name string) {
	delete(w.jobs, name)
	delete(w.pods, name)
	if t := w.truth[name]; t != nil && t.gone.IsZero() {
		t.gone, t.running = w.clock.Now(), false
	}
}

func (w *world) stepOf(i int) *modelStep {
	if i < 0 || i >= len(w.steps) {
		return nil
	}
	return w.steps[i]
}

// snapshotOf is every face's Snapshot: the job with its pods as the Trainer made them.
func (w *world) snapshotOf(_ context.Context, tj *trainer.TrainJob) (trainjob.Snapshot, error) {
	return trainjob.Snapshot{TrainJob: tj, Pods: slices.Clone(w.pods[tj.Name])}, nil
}

// faceCache is a face's informer: TrainJobs as the world's view has them, trimmed as the Argo
// and Tekton faces trim them (trainjob.TrimTrainJob) when trim is set, only those of owner
// scope when it is set (Argo's sidecar watches its own Workflow's).
type faceCache struct {
	w     *world
	trim  bool
	scope string
}

// holds says the cache holds tj at all.
func (c faceCache) holds(tj *trainer.TrainJob) bool {
	return tj != nil && (c.scope == "" || tj.Labels[trainjob.LabelOwnerUID] == c.scope)
}

func (c faceCache) read(tj *trainer.TrainJob) *trainer.TrainJob {
	out := tj.DeepCopy()
	if c.trim {
		trimmed, _ := trainjob.TrimTrainJob(out)
		out = trimmed.(*trainer.TrainJob)
	}
	return out
}

func (c faceCache) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	tj, ok := obj.(*trainer.TrainJob)
	if !ok {
		return fmt.Errorf("the model's informer holds TrainJobs only, not %T", obj)
	}
	have := c.w.view()[key.Name]
	if !c.holds(have) || key.Namespace != modelNamespace {
		return apierrors.NewNotFound(trainer.GroupVersion.WithResource("trainjobs").GroupResource(), key.Name)
	}
	*tj = *c.read(have)
	return nil
}

func (c faceCache) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	l, ok := list.(*trainer.TrainJobList)
	if !ok {
		return fmt.Errorf("the model's informer holds TrainJobs only, not %T", list)
	}
	o := (&client.ListOptions{}).ApplyOptions(opts)
	view := c.w.view()
	for _, name := range slices.Sorted(maps.Keys(view)) {
		tj := view[name]
		if c.holds(tj) && (o.Namespace == "" || o.Namespace == modelNamespace) && (o.LabelSelector == nil || o.LabelSelector.Matches(labels.Set(tj.Labels))) {
			l.Items = append(l.Items, *c.read(tj))
		}
	}
	return nil
}

// liveJobsOf are the TrainJobs x has and has not let go of that may still run: its own (by
// identity, at any of its retries) that no other step holds, and those it holds; a job that
// ended, is being deleted or was kept is no one's to end, nor one trainstep may not delete.
func (w *world) liveJobsOf(x *modelStep) []string {
	var live []string
	for _, name := range w.made {
		tj := w.jobs[name]
		if tj == nil || tj.DeletionTimestamp != nil || trainjob.Kept(tj) || ended(tj) || w.truth[name].undeletable {
			continue
		}
		if x.holds(tj) || (x.owns(tj) && len(trainjob.Holders(tj)) == 0) {
			live = append(live, name)
		}
	}
	return live
}

// ended says tj has a Complete or Failed condition.
func ended(tj *trainer.TrainJob) bool {
	for _, c := range tj.Status.Conditions {
		if (c.Type == trainer.TrainJobComplete || c.Type == trainer.TrainJobFailed) && c.Status == metav1.ConditionTrue {
			return true
		}
	}
	return false
}
