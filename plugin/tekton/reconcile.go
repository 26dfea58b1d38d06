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

	"github.com/trainstep/trainstep/core/lifecycle"
	"github.com/trainstep/trainstep/core/message"
	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
)

// Engine is the identity engine of TrainJobs this face creates (label trainstep.dev/engine).
const Engine = "tekton"

// Reconciler translates a CustomRun to a step of the core's lifecycle and back: its params are
// the step, its status the step's; the engine (core/lifecycle) does the rest.
type Reconciler struct {
	client    client.Client
	apiReader client.Reader
	engine    *lifecycle.Engine
	clock     clock.PassiveClock
	recorder  events.EventRecorder
	metrics   *metrics
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
		s.reassertTerminal()
		return reconcile.Result{}, nil
	}
	if run.IsCancelled() {
		return r.cancel(ctx, s)
	}
	s.startAttempt()
	spec, sources, err := specFromRun(run)
	if err != nil {
		s.finish(corev1.ConditionFalse, ReasonInvalidParams, err.Error())
		return reconcile.Result{}, nil
	}
	if err := podFromRun(run, spec); err != nil {
		s.finish(corev1.ConditionFalse, ReasonWorkspaceNotSupported, err.Error())
		return reconcile.Result{}, nil
	}
	d := deadlines(run, spec)
	st := r.engine.Look(ctx, lifecycle.Step{Spec: spec, Namespace: run.Namespace, Identity: identity(run, spec), Deadlines: d,
		FirstSince: firstStart(run), Recorded: s.extra.TrainJob})
	switch {
	case st.Err != nil:
		return r.notYet(ctx, s, st)
	case st.Invalid != nil:
		run.Status.Results = results(st.Outputs())
		r.metrics.ended.Observe(st.Observation, len(run.Status.RetriesStatus) > 0)
		s.finish(corev1.ConditionFalse, ReasonInvalidParams, explain(st.Invalid, sources).Error())
		return reconcile.Result{}, nil //nolint:nilerr // the step is wrong, not the reconcile: the run ends saying so
	}
	r.record(ctx, s, st)
	if st.Phase.Terminal() {
		r.ended(s, st, d)
		return reconcile.Result{}, nil
	}
	msg, wait := s.runningMessage(st.Message)
	s.setUnknown(string(st.Phase), msg)
	return sooner(r.wakeAt(s, st.Wake, !st.Wake.IsZero()), wait), nil
}

func (s *state) reassertTerminal() {
	t := s.extra.Terminal
	if t == nil {
		return
	}
	if c := s.run.Status.Succeeded(); c == nil {
		s.run.Status.Conditions = append(s.run.Status.Conditions, *t)
	} else if *c != *t {
		*c = *t
	}
}

// startAttempt marks the run started, and the attempt: a status someone cleared for a retry
// starts its attempt (and timeout) now.
func (s *state) startAttempt() {
	run := s.run
	if run.Status.Succeeded() == nil {
		start := metav1.NewTime(s.now)
		run.Status.StartTime = &start
		s.setUnknown(ReasonStarted, "planning the TrainJob")
	}
	if run.Status.StartTime == nil {
		start := metav1.NewTime(s.now)
		run.Status.StartTime = &start
	}
}

// notYet is a look that could not finish: a create the cache has not shown yet waits for its
// watch event; trouble that may pass is said on the run and retried with back-off.
func (r *Reconciler) notYet(ctx context.Context, s *state, st lifecycle.Status) (reconcile.Result, error) {
	if errors.Is(st.Err, lifecycle.ErrCacheLags) {
		return r.wakeAt(s, st.Wake, !st.Wake.IsZero()), nil
	}
	if st.Reason != "" {
		s.setUnknown(st.Reason, st.Message)
	}
	if st.Deleted || st.Name == "" {
		return reconcile.Result{}, st.Err
	}
	ctrl.LoggerFrom(ctx).V(1).Info("looking at the TrainJob again", "trainJob", klog.KRef(s.run.Namespace, st.Name), "error", st.Err.Error())
	return reconcile.Result{}, st.Err
}

// record keeps on the run what this look did: the attempt's TrainJob (the face's record, so a
// deleted job is told from one never made), its phase, and the Event of a delete.
func (r *Reconciler) record(ctx context.Context, s *state, st lifecycle.Status) {
	run := s.run
	if st.Created {
		// No Event: the status written next names the TrainJob, and an Event per step is a
		// request per step; the log keeps the line.
		ctrl.LoggerFrom(ctx).Info("created TrainJob", "trainJob", klog.KRef(st.Namespace, st.Name),
			"runtime", st.Runtime, "attempt", len(run.Status.RetriesStatus))
		if a := len(run.Status.RetriesStatus); a > 0 {
			st.Message += fmt.Sprintf(" (attempt %d of %d)", a+1, run.Spec.Retries+1)
		}
	}
	if st.Deleted && s.extra.TrainJob == st.Name {
		s.event(corev1.EventTypeNormal, ReasonTrainJobDeletion, "Delete", fmt.Sprintf("deleted TrainJob %s: %s", st.Name, st.Reason))
	}
	if st.Name != "" && st.Reason != lifecycle.ReasonNameTaken && st.Reason != lifecycle.ReasonTrainJobDeleted {
		s.extra.TrainJob = st.Name
	}
	r.metrics.setPhase(client.ObjectKeyFromObject(run), st.Phase)
}

// ended writes a finished attempt: its outputs (a failure's too: its failure-class and retryable
// say why, for a finally task, and a retried attempt keeps them in its retriesStatus entry); a
// failure or a timeout ends the run, or starts the next attempt while retries are left. A refusal
// no retry mends (the name taken, the controller's rights, the apiserver refusing the TrainJob)
// ends the run.
func (r *Reconciler) ended(s *state, st lifecycle.Status, d trainjob.Deadlines) {
	run := s.run
	run.Status.Results = results(st.Outputs())
	// Every attempt that ended is a step that ended, as each Argo node is: a failed attempt that
	// is retried spent its GPU-hours too.
	r.metrics.ended.Observe(st.Observation, len(run.Status.RetriesStatus) > 0)
	switch {
	case st.Phase == trainjob.PhaseSucceeded:
		s.finish(corev1.ConditionTrue, ReasonSucceeded, st.Message)
	case st.Phase == trainjob.PhaseTimedOut:
		s.retryOrFail(ReasonTimedOut, fmt.Sprintf("attempt %d timed out after %s: %s", len(run.Status.RetriesStatus)+1, d.Timeout, st.Message))
	case permanent(st.Reason):
		s.finish(corev1.ConditionFalse, st.Reason, st.Message)
	case st.Reason == lifecycle.ReasonTrainJobDeleted:
		s.event(corev1.EventTypeWarning, ReasonTrainJobDeleted, "Observe", st.Message)
		s.retryOrFail(ReasonTrainJobDeleted, st.Message)
	default:
		reason := st.Reason
		if reason == "" {
			reason = ReasonFailed
		}
		s.retryOrFail(reason, st.Message)
	}
	r.noticed(s, st.Observation)
}

// permanent says a failure's reason is one no retry of the attempt mends.
func permanent(reason string) bool {
	switch reason {
	case lifecycle.ReasonNameTaken, lifecycle.ReasonForbidden, lifecycle.ReasonTrainJobRefused,
		lifecycle.ReasonPlanningForbidden, lifecycle.ReasonPlanningFailed:
		return true
	}
	return false
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
// running), and read here once before the verdicts that depend on its pods
// (lifecycle.Cluster.PodsBeforeVerdict).
func (r *Reconciler) unlabelledPods(ctx context.Context, tj *trainer.TrainJob) ([]corev1.Pod, error) {
	return trainjob.ListPods(ctx, r.apiReader, tj)
}

// firstStart is when the run's first attempt began: each retry archives the attempt before it
// in status.retriesStatus, its start included (retryOrFail).
func firstStart(run *v1beta1.CustomRun) time.Time {
	if rs := run.Status.RetriesStatus; len(rs) > 0 && rs[0].StartTime != nil {
		return rs[0].StartTime.Time
	}
	if run.Status.StartTime != nil {
		return run.Status.StartTime.Time
	}
	return time.Time{}
}

// deadlines are the attempt's bounds, counted from its start.
func deadlines(run *v1beta1.CustomRun, spec *step.Spec) trainjob.Deadlines {
	d := trainjob.StepDeadlines(spec)
	d.Timeout, d.Since = attemptTimeout(run, spec), run.Status.StartTime.Time
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

// cancel stops the run: the engine deletes its TrainJob, and the run ends with the reason
// Tekton matches.
func (r *Reconciler) cancel(ctx context.Context, s *state) (reconcile.Result, error) {
	run := s.run
	// The step's namePrefix names the job; a run whose params no longer parse still finds its
	// job by the identity's labels.
	spec, _, _ := specFromRun(run)
	st := r.engine.Look(ctx, lifecycle.Step{Spec: spec, Namespace: run.Namespace, Identity: identity(run, spec), Recorded: s.extra.TrainJob, Stop: true})
	if st.Err != nil {
		return reconcile.Result{}, st.Err
	}
	msg := run.Spec.StatusMessage
	if msg == "" {
		msg = "CustomRun cancelled (spec.status RunCancelled)"
	}
	if st.Deleted {
		if s.extra.TrainJob == st.Name {
			s.event(corev1.EventTypeNormal, ReasonTrainJobDeletion, "Delete", fmt.Sprintf("deleted TrainJob %s: the run was cancelled", st.Name))
		}
		msg += fmt.Sprintf("; TrainJob %s deleted", st.Name)
	}
	if st.Released {
		msg += "; " + st.Message
	}
	s.finish(corev1.ConditionFalse, ReasonCancelled, msg)
	return reconcile.Result{}, nil
}

// identity is the CustomRun's step: the run's UID (stable across controller restarts), its name
// for a readable TrainJob name (unless the step sets namePrefix; spec may be nil), and the
// attempt, len(status.retriesStatus).
func identity(run *v1beta1.CustomRun, spec *step.Spec) trainjob.Identity {
	id := trainjob.Identity{
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
	if spec != nil {
		id.NamePrefix = spec.NamePrefix
	}
	return id
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
