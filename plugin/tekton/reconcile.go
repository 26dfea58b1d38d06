package tekton

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trainstep/trainstep/core/message"
	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
)

// Engine is the identity engine of TrainJobs this face creates (label trainstep.dev/engine).
const Engine = "tekton"

// Reconciler drives one CustomRun: it is a run of early returns — gone, not ours, finished,
// cancelled, bad params, timed out, then create-or-observe the TrainJob of the current attempt.
type Reconciler struct {
	client    client.Client
	apiReader client.Reader
	planner   *trainjob.Planner
	logs      trainjob.LogSource
	clock     clock.PassiveClock
	recorder  events.EventRecorder
	metrics   *metrics
	tails     *trainjob.Tails
	creating  *creates
	writes    *writes
	// ownPods: the pod cache holds only pods carrying trainstep's labels (see unlabelledPods).
	ownPods bool
	// workloads reads Kueue's Workloads (workloads.go); nil when Kueue's API was not served.
	workloads client.Reader
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// extraFields is trainstep's record in status.extraFields.
type extraFields struct {
	// TrainJob is the current attempt's TrainJob, once created.
	TrainJob string `json:"trainJob,omitempty"`
	// Terminal is the final condition, kept so it can be re-asserted unchanged (terminal is final).
	Terminal *v1beta1.Condition `json:"terminal,omitempty"`
	// ProgressAt is when the running message was last written (progress.go throttles it).
	ProgressAt *metav1.Time `json:"progressAt,omitempty"`
}

// event is sent after the status write that it reports has succeeded.
type event struct {
	kind, reason, action, note string
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	stale := false
	defer func() {
		switch {
		case stale:
			r.metrics.reconciles.WithLabelValues("stale").Inc()
		case err != nil:
			r.metrics.reconciles.WithLabelValues("error").Inc()
		case res.RequeueAfter > 0:
			r.metrics.reconciles.WithLabelValues("requeue").Inc()
		default:
			r.metrics.reconciles.WithLabelValues("ok").Inc()
		}
	}()
	run := &v1beta1.CustomRun{}
	if err := r.client.Get(ctx, req.NamespacedName, run); err != nil {
		if apierrors.IsNotFound(err) {
			r.metrics.forget(req.NamespacedName)
			r.writes.forget(req.NamespacedName)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading CustomRun %s: %w", req, err)
	}
	if r.writes.stale(req.NamespacedName, run.ResourceVersion, r.clock.Now()) {
		// The cache has not shown our last status write yet; its event brings the run back.
		stale = true
		return reconcile.Result{}, nil
	}
	if !run.RefersTo(APIVersion, Kind) {
		return reconcile.Result{}, nil
	}
	// The logger in ctx already names the run (controller-runtime adds CustomRun, namespace,
	// name and reconcileID); adding it again cost an encoded logger per reconcile.

	before := run.DeepCopy()
	st := &state{run: run, extra: decodeExtra(run), now: r.clock.Now()}
	res, err = r.reconcile(ctx, st)
	st.encodeExtra()
	if err == nil {
		run.Status.ObservedGeneration = run.Generation // this spec (a cancel patch, say) has been acted on
	}
	if !equality.Semantic.DeepEqual(before.Status, run.Status) {
		if uerr := r.writeStatus(ctx, before, run); uerr != nil {
			if apierrors.IsConflict(uerr) {
				// A newer run is on its way to us through the watch; act on that one.
				return reconcile.Result{}, nil
			}
			return reconcile.Result{}, errors.Join(err, fmt.Errorf("writing the status of CustomRun %s: %w", req, uerr))
		}
		r.writes.wrote(req.NamespacedName, before.ResourceVersion, run.ResourceVersion, st.now)
	}
	for _, e := range st.events {
		r.recorder.Eventf(run, nil, e.kind, e.reason, e.action, "%s", e.note)
	}
	if run.Status.CompletionTime != nil {
		r.metrics.forget(req.NamespacedName)
	}
	return res, err
}

// writeStatus writes the run's status: whole while it runs, as a patch of what changed once it
// has finished. The cache holds a finished run without its results and archived attempts
// (trimCustomRun), so a whole write would erase them; a patch from the cached run sends only the
// condition or observedGeneration it re-asserts. Both fail on a stale read (resourceVersion).
func (r *Reconciler) writeStatus(ctx context.Context, before, run *v1beta1.CustomRun) error {
	if before.Status.CompletionTime == nil {
		return r.client.Status().Update(ctx, run)
	}
	return r.client.Status().Patch(ctx, run, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

// state is one reconcile's view: the run being mutated in memory, and what to report after.
type state struct {
	run    *v1beta1.CustomRun
	extra  extraFields
	now    time.Time
	events []event
}

func decodeExtra(run *v1beta1.CustomRun) extraFields {
	var x extraFields
	if len(run.Status.ExtraFields.Raw) > 0 {
		_ = json.Unmarshal(run.Status.ExtraFields.Raw, &x) // someone else's fields: start afresh
	}
	return x
}

// encodeExtra writes the record back, leaving the stored bytes alone when they say the same
// (the apiserver returns the JSON re-encoded, so bytes alone would differ and cause writes).
func (s *state) encodeExtra() {
	if s.extra == (extraFields{}) && len(s.run.Status.ExtraFields.Raw) == 0 {
		return
	}
	if old := decodeExtra(s.run); equality.Semantic.DeepEqual(old, s.extra) {
		return
	}
	b, _ := json.Marshal(s.extra) // plain strings and a condition always marshal
	s.run.Status.ExtraFields = runtime.RawExtension{Raw: b}
}

func (s *state) event(kind, reason, action, note string) {
	s.events = append(s.events, event{kind: kind, reason: reason, action: action, note: note})
}

func (s *state) setUnknown(reason, msg string) {
	s.run.Status.SetSucceeded(v1beta1.Condition{Status: corev1.ConditionUnknown, Reason: reason, Message: truncate(msg),
		LastTransitionTime: metav1.NewTime(s.now)})
}

// finish ends the run for good: condition, completion time and the terminal record together.
func (s *state) finish(status corev1.ConditionStatus, reason, msg string) {
	now := metav1.NewTime(s.now)
	s.run.Status.SetSucceeded(v1beta1.Condition{Status: status, Reason: reason, Message: truncate(msg), LastTransitionTime: now})
	s.run.Status.CompletionTime = &now
	c := *s.run.Status.Succeeded()
	s.extra.Terminal = &c
	kind := corev1.EventTypeNormal
	if status != corev1.ConditionTrue {
		kind = corev1.EventTypeWarning
	}
	s.event(kind, reason, "Finish", msg)
}

func (r *Reconciler) reconcile(ctx context.Context, s *state) (reconcile.Result, error) {
	run := s.run
	// Terminal is final: a later cancel patch (Tekton patches every child, finished or not) or a
	// status reset by someone else changes nothing; the stored outcome is re-asserted.
	if run.Status.CompletionTime != nil {
		if t := s.extra.Terminal; t != nil {
			if c := run.Status.Succeeded(); c == nil {
				run.Status.Conditions = append(run.Status.Conditions, *t)
			} else if *c != *t {
				*c = *t
			}
		}
		return reconcile.Result{}, nil
	}
	if run.IsCancelled() {
		return reconcile.Result{}, r.cancel(ctx, s)
	}
	if run.Status.Succeeded() == nil {
		start := metav1.NewTime(s.now)
		run.Status.StartTime = &start
		s.setUnknown(ReasonStarted, "planning the TrainJob")
	}
	if run.Status.StartTime == nil { // cleared by someone for a retry: the attempt starts now
		start := metav1.NewTime(s.now)
		run.Status.StartTime = &start
	}

	spec, sources, err := specFromRun(run)
	if err != nil {
		s.finish(corev1.ConditionFalse, ReasonInvalidParams, err.Error())
		return reconcile.Result{}, nil
	}
	if err := podFromRun(run, spec); err != nil {
		s.finish(corev1.ConditionFalse, ReasonWorkspaceNotSupported, err.Error())
		return reconcile.Result{}, nil
	}
	id := identity(run)
	name := id.Name()
	d := deadlines(run, spec)

	// The TrainJob is read before any deadline is checked: one that finished in time is
	// reported as it finished however late this reconcile runs (a backlog, a restart, a new leader).
	tj, err := r.stepJob(ctx, run.Namespace, id)
	if err == nil {
		name = tj.Name // an earlier release's name, for a job it started (see stepJob)
	}
	switch {
	case apierrors.IsNotFound(err) && d.Timeout > 0 && !s.now.Before(d.Since.Add(d.Timeout)):
		return reconcile.Result{}, r.timedOut(ctx, s, name, d.Timeout, spec.KeepOnTimeout)
	case apierrors.IsNotFound(err) && s.extra.TrainJob != "":
		// This attempt recorded its job (under this release's name, or an earlier one's).
		return r.missing(ctx, s, s.extra.TrainJob, d)
	case apierrors.IsNotFound(err):
		// Planned only when there is a TrainJob to create: a running job is not failed by a
		// runtime edited after it started.
		plan, err := r.planner.Plan(ctx, spec, run.Namespace)
		if err != nil {
			if step.IsInvalid(err) {
				s.finish(corev1.ConditionFalse, ReasonInvalidParams, explain(err, sources).Error())
				return reconcile.Result{}, nil
			}
			f := classifyPlanning(err)
			if f.permanent {
				s.finish(corev1.ConditionFalse, f.reason, f.message)
				return reconcile.Result{}, nil
			}
			s.setUnknown(f.reason, f.message)
			return reconcile.Result{}, fmt.Errorf("planning the TrainJob: %w", err)
		}
		if err := r.ensureTrainJob(ctx, s, plan, id); err != nil {
			return reconcile.Result{}, err
		}
		return r.wakeAt(s, d.Since.Add(d.Timeout), d.Timeout > 0), nil
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("reading TrainJob %s/%s from the cache: %w", run.Namespace, name, err)
	}
	s.extra.TrainJob = name
	if !id.Owns(tj.Labels) {
		s.finish(corev1.ConditionFalse, ReasonNameTaken, fmt.Sprintf("%v: %s/%s", trainjob.ErrNameTaken, tj.Namespace, tj.Name))
		return reconcile.Result{}, nil
	}

	snap, err := r.snapshot(ctx, tj)
	if err != nil {
		return reconcile.Result{}, err
	}
	snap.Now = s.now
	v := trainjob.Decide(snap, d)
	if r.ownPods && len(snap.Pods) == 0 && (v.Phase == trainjob.PhaseSucceeded || v.Reason == trainjob.ReasonStartTimeout) {
		// Before a verdict the pods decide (rank 0's return value, a start timeout that deletes the
		// job), make sure the job has none the cache cannot see: see unlabelledPods.
		pods, err := r.unlabelledPods(ctx, tj)
		if err != nil {
			return reconcile.Result{}, err
		}
		if len(pods) > 0 {
			snap.Pods = pods
			v = trainjob.Decide(snap, d)
		}
	}
	r.metrics.setPhase(client.ObjectKeyFromObject(run), v.Phase)
	if !v.MarkStarted.IsZero() {
		// Recorded on the TrainJob so startTimeout never applies again, whichever replica
		// reconciles next; a failure is tried again at the next reconcile.
		if err := trainjob.MarkStarted(ctx, r.client, tj.Namespace, tj.Name, v.MarkStarted); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "recording that a TrainJob started; tried again at the next reconcile", "trainJob", klog.KObj(tj))
		}
	}
	if v.Delete {
		// A plain delete: on failure the reconcile is requeued with back-off rather than holding a
		// worker through an apiserver outage.
		if err := r.deleteTrainJob(ctx, s, name, v.Reason); err != nil {
			return reconcile.Result{}, err
		}
	}
	if v.Keep {
		// Marked kept and freed of its owner reference: deleting the CustomRun or its PipelineRun
		// must not take a job the step asked to outlive its timeout.
		if v.Observation, err = trainjob.ConcludeKeep(ctx, r.client, v); err != nil {
			return reconcile.Result{}, err
		}
	}
	switch v.Phase {
	case trainjob.PhaseSucceeded:
		run.Status.Results = results(v.Outputs())
		s.finish(corev1.ConditionTrue, ReasonSucceeded, v.Message)
		r.noticed(s, v.Observation)
		return reconcile.Result{}, nil
	case trainjob.PhaseFailed:
		obs := r.tailer().WithTail(ctx, v)
		r.noticed(s, obs)
		reason := obs.Reason
		if reason == "" {
			reason = ReasonFailed
		}
		s.retryOrFail(reason, obs.Message)
		return reconcile.Result{}, nil
	case trainjob.PhaseTimedOut:
		msg := fmt.Sprintf("attempt %d timed out after %s: %s", len(run.Status.RetriesStatus)+1, d.Timeout, v.Message)
		if v.Delete {
			msg += "; it was deleted"
		}
		s.retryOrFail(ReasonTimedOut, msg)
		return reconcile.Result{}, nil
	}
	obs := v.Observation
	if v.TailPod != "" {
		obs = r.tails.WithTail(ctx, r.tailer(), v)
	}
	msg, wait := s.runningMessage(obs.Message)
	s.setUnknown(string(obs.Phase), msg)
	return sooner(r.wakeAt(s, v.Wake, !v.Wake.IsZero()), wait), nil
}

// stepJob is the attempt's TrainJob as the cache has it: by its name, or else by its identity
// labels, for a job an earlier release made under another name (the controller upgraded while
// the run ran; trainjob.FindByIdentity, an index read: no request). NotFound when neither.
func (r *Reconciler) stepJob(ctx context.Context, namespace string, id trainjob.Identity) (*trainer.TrainJob, error) {
	tj := &trainer.TrainJob{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: id.Name()}, tj)
	if !apierrors.IsNotFound(err) {
		return tj, err
	}
	found, ferr := trainjob.FindByIdentity(ctx, r.client, namespace, id, true)
	switch {
	case ferr != nil:
		return nil, ferr
	case found != nil:
		return found, nil
	}
	return nil, err
}

// snapshot is the TrainJob with its pods and the Events about it, as the cache has them.
func (r *Reconciler) snapshot(ctx context.Context, tj *trainer.TrainJob) (trainjob.Snapshot, error) {
	pods := &corev1.PodList{}
	if err := r.client.List(ctx, pods, client.InNamespace(tj.Namespace), client.MatchingFields{trainjob.IndexPodJobSet: tj.Name}); err != nil {
		return trainjob.Snapshot{}, fmt.Errorf("listing the pods of TrainJob %s/%s: %w", tj.Namespace, tj.Name, err)
	}
	evs := &corev1.EventList{}
	if err := r.client.List(ctx, evs, client.InNamespace(tj.Namespace), client.MatchingFields{trainjob.IndexEventObject: tj.Name}); err != nil {
		return trainjob.Snapshot{}, fmt.Errorf("listing the Events of TrainJob %s/%s: %w", tj.Namespace, tj.Name, err)
	}
	snap := trainjob.Snapshot{TrainJob: tj, Pods: pods.Items, Events: evs.Items}
	// A queued TrainJob's Workload says, in Kueue's words, why it waits (from the watch cache).
	if r.workloads != nil {
		w, err := trainjob.FindWorkload(ctx, r.workloads, tj)
		if err != nil {
			return trainjob.Snapshot{}, err
		}
		snap.Workload = w
	}
	return snap, nil
}

// unlabelledPods reads a TrainJob's pods from the apiserver. The pod cache holds only pods
// carrying trainstep's labels; a TrainJob created before the controller labelled its pods (one
// still running across an upgrade) has pods only the apiserver shows. Such a job is followed
// through its TrainJob's conditions (its pods wake no reconcile, and its message may say 0 nodes
// running), and read here once before the verdicts that depend on its pods. A job whose pods are
// labelled never comes here with none but in the rare case where it has none at such a verdict.
func (r *Reconciler) unlabelledPods(ctx context.Context, tj *trainer.TrainJob) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := r.apiReader.List(ctx, pods, client.InNamespace(tj.Namespace), client.MatchingLabels{trainjob.LabelJobSetName: tj.Name}); err != nil {
		return nil, fmt.Errorf("listing the pods of TrainJob %s/%s: %w", tj.Namespace, tj.Name, err)
	}
	return pods.Items, nil
}

func (r *Reconciler) tailer() trainjob.Tailer {
	return trainjob.Tailer{Logs: r.logs, Pods: r.apiReader}
}

// deadlines are the attempt's bounds, counted from its start.
func deadlines(run *v1beta1.CustomRun, spec *step.Spec) trainjob.Deadlines {
	d := trainjob.Deadlines{Timeout: attemptTimeout(run, spec), KeepOnTimeout: spec.KeepOnTimeout, Since: run.Status.StartTime.Time}
	if spec.StartTimeout != nil {
		d.StartTimeout = spec.StartTimeout.Duration
	}
	return d
}

func (r *Reconciler) noticed(s *state, obs trainjob.Observation) {
	if obs.CompletionTime != nil {
		r.metrics.notice.Observe(s.now.Sub(*obs.CompletionTime).Seconds())
	}
	if c := s.run.Status.Succeeded(); c != nil && s.run.Status.CompletionTime != nil {
		r.metrics.finished.WithLabelValues(string(c.Status), c.Reason).Inc()
	}
}

// wakeAt wakes the run when its next deadline passes: a timer, not a poll — every other change
// arrives through the CustomRun, TrainJob, pod and Event watches.
func (r *Reconciler) wakeAt(s *state, at time.Time, set bool) reconcile.Result {
	if !set {
		return reconcile.Result{}
	}
	return reconcile.Result{RequeueAfter: max(at.Sub(s.now), 0) + 10*time.Millisecond}
}

// missing handles the TrainJob this attempt recorded as created but the cache does not hold:
// either this process's own create has not come through the TrainJob watch yet — its event
// wakes the run, so nothing is read — or someone deleted it, which the apiserver confirms and
// which fails the attempt.
func (r *Reconciler) missing(ctx context.Context, s *state, name string, d trainjob.Deadlines) (reconcile.Result, error) {
	run := s.run
	key := client.ObjectKey{Namespace: run.Namespace, Name: name}
	if at, ok := r.creating.since(key); ok {
		if backstop := at.Add(createSeenWithin); s.now.Before(backstop) {
			// Woken at the backstop too, in case the watch never shows the job (created and
			// deleted while the informer was relisting).
			next := backstop
			if d.Timeout > 0 && d.Since.Add(d.Timeout).Before(next) {
				next = d.Since.Add(d.Timeout)
			}
			return r.wakeAt(s, next, true), nil
		}
		r.creating.done(key)
	}
	err := r.apiReader.Get(ctx, key, &trainer.TrainJob{})
	switch {
	case err == nil:
		// The cache lags (a restart, a relist); the watch brings the job.
		return r.wakeAt(s, d.Since.Add(d.Timeout), d.Timeout > 0), nil
	case !apierrors.IsNotFound(err):
		return reconcile.Result{}, fmt.Errorf("reading TrainJob %s/%s: %w", run.Namespace, name, err)
	}
	s.event(corev1.EventTypeWarning, ReasonTrainJobDeleted, "Observe", fmt.Sprintf("TrainJob %s was deleted before it finished", name))
	s.retryOrFail(ReasonTrainJobDeleted, fmt.Sprintf("TrainJob %s/%s was deleted before it finished", run.Namespace, name))
	return reconcile.Result{}, nil
}

// ensureTrainJob creates the attempt's TrainJob. The cache said it is not there, so it is
// created straight away (no read first); only when the apiserver has one of that name already
// (a restarted controller whose cache lagged, a name taken by someone else) is it read, and
// adopted when it carries this step's identity.
func (r *Reconciler) ensureTrainJob(ctx context.Context, s *state, plan *trainjob.Plan, id trainjob.Identity) error {
	run := s.run
	obj, err := plan.Object(id)
	if err != nil {
		return fmt.Errorf("rendering the TrainJob: %w", err)
	}
	key := client.ObjectKeyFromObject(obj)
	r.creating.add(key, s.now) // before the create: its watch event may come before Create returns
	err = r.client.Create(ctx, obj)
	created := err == nil
	if apierrors.IsAlreadyExists(err) {
		_, _, err = trainjob.Submit(ctx, submitClient{Reader: r.apiReader, Client: r.client}, obj, id)
	}
	if !created {
		r.creating.done(key)
	}
	if err != nil {
		if errors.Is(err, trainjob.ErrNameTaken) {
			s.finish(corev1.ConditionFalse, ReasonNameTaken, err.Error())
			return nil
		}
		// Say why now instead of "planning" until a timeout: the cause when retrying cannot help,
		// that it is retrying and why when it can.
		f := classifyCreate(err)
		if f.permanent {
			s.finish(corev1.ConditionFalse, f.reason, f.message)
			return nil
		}
		s.setUnknown(f.reason, f.message)
		return fmt.Errorf("submitting the TrainJob: %w", err)
	}
	s.extra.TrainJob = key.Name
	if created {
		// No Event: the status written next names the TrainJob, and an Event per step is a
		// request per step; the log keeps the line.
		ctrl.LoggerFrom(ctx).Info("created TrainJob", "trainJob", klog.KRef(key.Namespace, key.Name),
			"runtime", plan.Runtime.Name, "nodes", plan.NumNodes(), "attempt", len(run.Status.RetriesStatus))
	}
	r.metrics.setPhase(client.ObjectKeyFromObject(run), trainjob.PhasePending)
	msg := fmt.Sprintf("TrainJob %s is starting: 0/%d nodes running", key.Name, plan.NumNodes())
	if a := len(run.Status.RetriesStatus); a > 0 {
		msg += fmt.Sprintf(" (attempt %d of %d)", a+1, run.Spec.Retries+1)
	}
	s.setUnknown(string(trainjob.PhasePending), msg)
	return nil
}

// submitClient reads from the apiserver and writes through the manager's client.
type submitClient struct {
	client.Reader
	Client client.Client
}

func (c submitClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.Client.Create(ctx, obj, opts...)
}

// retryOrFail archives the attempt and starts the next while retries are left, else fails.
func (s *state) retryOrFail(reason, msg string) {
	run := s.run
	if len(run.Status.RetriesStatus) >= run.Spec.Retries {
		s.finish(corev1.ConditionFalse, reason, msg)
		return
	}
	now := metav1.NewTime(s.now)
	archived := v1beta1.CustomRunStatus{
		ObservedGeneration: run.Status.ObservedGeneration,
		StartTime:          run.Status.StartTime,
		CompletionTime:     &now,
		Results:            run.Status.Results,
		Conditions: []v1beta1.Condition{{Type: v1beta1.ConditionSucceeded, Status: corev1.ConditionFalse,
			Reason: reason, Message: truncate(msg), LastTransitionTime: now}},
	}
	if x, err := json.Marshal(extraFields{TrainJob: s.extra.TrainJob}); err == nil && s.extra.TrainJob != "" {
		archived.ExtraFields = runtime.RawExtension{Raw: x}
	}
	run.Status.RetriesStatus = append(run.Status.RetriesStatus, archived)
	run.Status.Results = nil
	run.Status.StartTime = &now // the next attempt, and its timeout, start now
	s.extra.TrainJob = ""
	note := fmt.Sprintf("attempt %d of %d failed (%s: %s); starting attempt %d",
		len(run.Status.RetriesStatus), run.Spec.Retries+1, reason, message.FirstLine(msg), len(run.Status.RetriesStatus)+1)
	s.setUnknown(ReasonRetrying, note)
	s.event(corev1.EventTypeWarning, ReasonRetrying, "Retry", note)
}

// cancel deletes the TrainJob and ends the run with the reason Tekton matches.
func (r *Reconciler) cancel(ctx context.Context, s *state) error {
	run := s.run
	name := s.extra.TrainJob // the job this attempt recorded, whichever release named it
	if name == "" {
		name = identity(run).Name()
	}
	if err := r.deleteTrainJob(ctx, s, name, "the run was cancelled"); err != nil {
		return err
	}
	msg := run.Spec.StatusMessage
	if msg == "" {
		msg = "CustomRun cancelled (spec.status RunCancelled)"
	}
	if s.extra.TrainJob != "" {
		msg += fmt.Sprintf("; TrainJob %s deleted", s.extra.TrainJob)
	}
	s.finish(corev1.ConditionFalse, ReasonCancelled, msg)
	return nil
}

func (r *Reconciler) timedOut(ctx context.Context, s *state, name string, timeout time.Duration, keep bool) error {
	msg := fmt.Sprintf("attempt %d timed out after %s", len(s.run.Status.RetriesStatus)+1, timeout)
	// The cache showed no TrainJob: ask the apiserver before saying what became of it, so a
	// job deleted while the controller was away is not reported "kept" or "deleted".
	err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: s.run.Namespace, Name: name}, &trainer.TrainJob{})
	switch {
	case apierrors.IsNotFound(err) && s.extra.TrainJob != "":
		msg += fmt.Sprintf("; TrainJob %s no longer exists (it was deleted before the timeout passed)", name)
	case apierrors.IsNotFound(err):
		msg += "; no TrainJob was created"
	case err != nil:
		return fmt.Errorf("reading TrainJob %s/%s: %w", s.run.Namespace, name, err)
	case keep:
		msg += fmt.Sprintf("; TrainJob %s kept (keepOnTimeout)", name)
	default:
		if err := r.deleteTrainJob(ctx, s, name, "the attempt timed out"); err != nil {
			return err
		}
		msg += fmt.Sprintf("; TrainJob %s deleted", name)
	}
	s.retryOrFail(ReasonTimedOut, msg)
	return nil
}

// deleteTrainJob deletes the attempt's TrainJob (a gone one is not an error) and, when this run
// made it, says why in an Event.
func (r *Reconciler) deleteTrainJob(ctx context.Context, s *state, name, why string) error {
	if err := trainjob.Delete(ctx, r.client, s.run.Namespace, name); err != nil {
		return err
	}
	if s.extra.TrainJob == name {
		s.event(corev1.EventTypeNormal, ReasonTrainJobDeletion, "Delete", fmt.Sprintf("deleted TrainJob %s: %s", name, why))
	}
	return nil
}

// identity is the CustomRun's step: the run's UID (stable across controller restarts), its name
// for a readable TrainJob name, and the attempt, len(status.retriesStatus).
func identity(run *v1beta1.CustomRun) trainjob.Identity {
	return trainjob.Identity{
		Engine:   Engine,
		OwnerUID: string(run.UID),
		StepKey:  run.Name,
		Attempt:  len(run.Status.RetriesStatus),
		Owner: &metav1.OwnerReference{
			APIVersion:         v1beta1.GroupVersion.String(),
			Kind:               "CustomRun",
			Name:               run.Name,
			UID:                run.UID,
			Controller:         ptr.To(true),
			BlockOwnerDeletion: ptr.To(true),
		},
	}
}

// attemptTimeout is the per-attempt bound: spec.timeout (none when unset or 0), tightened by the
// step's own timeout if it sets one.
func attemptTimeout(run *v1beta1.CustomRun, spec *step.Spec) time.Duration {
	// No timeout of trainstep's own: Tekton leaves spec.timeout nil when the PipelineTask sets
	// none, even under a PipelineRun timeout, and cancels the run itself when that passes. A
	// training that is fine is not killed after an arbitrary 60 minutes.
	var t time.Duration
	if run.Spec.Timeout != nil {
		t = run.Spec.Timeout.Duration
	}
	if spec.Timeout != nil && spec.Timeout.Duration > 0 && (t == 0 || spec.Timeout.Duration < t) {
		t = spec.Timeout.Duration
	}
	return t
}

// results are the core's outputs, every name always present, in the core's stable order.
func results(out map[string]string) []v1beta1.CustomRunResult {
	res := make([]v1beta1.CustomRunResult, 0, len(out))
	for _, n := range trainjob.OrderedNames(out) {
		res = append(res, v1beta1.CustomRunResult{Name: n, Value: out[n]})
	}
	return res
}
