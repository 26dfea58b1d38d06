package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainjob"
)

// Reasons of the steps that end before their TrainJob says anything.
const (
	// ReasonTrainJobDeleted: the TrainJob this attempt created is gone before it finished.
	ReasonTrainJobDeleted = "TrainJobDeleted"
	// ReasonNameTaken: the attempt's TrainJob name is someone else's job.
	ReasonNameTaken = "TrainJobNameTaken"
	// ReasonForbidden: the face may not create the TrainJob.
	ReasonForbidden = "TrainJobForbidden"
	// ReasonTrainJobRefused: the apiserver or an admission webhook refused the TrainJob as it
	// is; the same request would be refused again.
	ReasonTrainJobRefused = "TrainJobRefused"
	// ReasonPlanningForbidden: the face may not read what planning needs (the TrainJob CRD,
	// runtimes).
	ReasonPlanningForbidden = "PlanningForbidden"
	// ReasonPlanningFailed: planning failed in a way no retry mends (the Trainer not installed).
	ReasonPlanningFailed = "PlanningFailed"
	// ReasonPlanningRetrying and ReasonCreateRetrying: a failure that may pass, retried.
	ReasonPlanningRetrying = "PlanningRetrying"
	ReasonCreateRetrying   = "TrainJobCreateRetrying"
)

// absent is the look at a step whose TrainJob the cache does not hold: the attempt's deadline
// passed, a recorded job someone deleted, a job whose create the cache has not shown yet, or
// none yet: plan and submit it.
func (e *Engine) absent(ctx context.Context, s Step) Status {
	if s.Recorded != "" {
		if st, done := e.recorded(ctx, s); done {
			return st
		}
	}
	if at := e.deadline(s); !at.IsZero() && !e.now().Before(at) {
		return Status{Observation: trainjob.Observation{Namespace: s.Namespace, Phase: trainjob.PhaseTimedOut,
			Reason: trainjob.ReasonTimeout, Message: fmt.Sprintf("the step's timeout of %s passed before its TrainJob was created", s.Deadlines.Timeout)}}
	}
	st := e.submit(ctx, s)
	if st.Err != nil {
		// Trouble that may pass (a create that keeps failing): the face looks again with
		// back-off, and at the timeout at the latest, which ends the step above.
		st.Wake = earliest(st.Wake, e.deadline(s))
	}
	return st
}

// recorded settles a TrainJob the face's record says this attempt created and the cache does
// not hold: the apiserver says whether the cache lags (look again when it shows it) or someone
// deleted it (the step fails: it does not train again from zero).
func (e *Engine) recorded(ctx context.Context, s Step) (Status, bool) {
	key := client.ObjectKey{Namespace: s.Namespace, Name: s.Recorded}
	lags := Status{Err: ErrCacheLags, Observation: trainjob.Observation{Namespace: s.Namespace, Name: s.Recorded,
		Phase: trainjob.PhasePending, Message: fmt.Sprintf("TrainJob %s is starting", s.Recorded)}}
	if at, ok := e.Creates.inFlight(key); ok {
		if backstop := at.Add(createSeenWithin); e.now().Before(backstop) {
			// Looked at again at the backstop too, in case the watch never shows the job
			// (created and deleted while the informer was relisting).
			lags.Wake = earliest(backstop, e.deadline(s))
			return lags, true
		}
		e.Creates.done(key)
	}
	err := e.API.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Recorded}, &trainer.TrainJob{})
	switch {
	case err == nil:
		lags.Wake = e.deadline(s) // the watch brings the job
		return lags, true
	case !apierrors.IsNotFound(err):
		return Status{Err: fmt.Errorf("reading TrainJob %s/%s: %w", s.Namespace, s.Recorded, err),
			Observation: trainjob.Observation{Namespace: s.Namespace, Name: s.Recorded}}, true
	}
	return failed(s, s.Recorded, ReasonTrainJobDeleted, fmt.Sprintf(
		"TrainJob %s was deleted before it finished; trainstep does not start it again from zero (retry the step to train again)", s.Recorded)), true
}

// submit plans the step and creates its TrainJob, or adopts the one of its identity that the
// apiserver has (a replayed look whose cache lagged).
func (e *Engine) submit(ctx context.Context, s Step) Status {
	plan, err := e.Planner.Plan(ctx, s.Spec, s.Namespace)
	if err != nil {
		return e.planningFailed(s, err)
	}
	ckey, err := cacheKey(s, plan)
	if err != nil {
		return invalid(s, err)
	}
	if s.retryOf == "" { // a retry trains again: the step already chose not to be served
		if st, ok := e.served(ctx, s, ckey); ok {
			return st
		}
		if ckey != "" && !s.Spec.Cache.Refresh { // a refresh trains, whatever else trains now
			if st, ok := e.join(ctx, s, ckey); ok {
				return st
			}
		}
	}
	obj, err := plan.Object(s.Identity)
	if err != nil {
		return invalid(s, err)
	}
	markCached(obj, ckey, s.Identity)
	markRetry(obj, s, e.firstSince(ctx, s))
	key := client.ObjectKeyFromObject(obj)
	e.Creates.add(key, e.now()) // before the create: its watch event may come before it returns
	tj, created, err := trainjob.Submit(ctx, submitter{Reader: e.API, Writer: e.Writer}, obj, s.Identity)
	if !created {
		e.Creates.done(key)
	}
	if err != nil {
		return e.createFailed(s, obj.GetName(), err)
	}
	msg := fmt.Sprintf("TrainJob %s is starting: 0/%d nodes running", tj.Name, plan.NumNodes())
	if len(plan.Warnings) > 0 { // the step's first message: every face shows it
		msg += "; " + strings.Join(plan.Warnings, "; ")
	}
	st := Status{Created: created, Observation: trainjob.Observation{Namespace: tj.Namespace, Name: tj.Name,
		Phase: trainjob.PhasePending, Reason: string(trainjob.PhasePending), Message: msg,
		Runtime: plan.Runtime.Name, Framework: tj.Labels[trainjob.LabelFramework], CacheKey: ckey}}
	st.Wake = e.deadline(s)
	return st
}

// earliest is the sooner of two times, zero counting as never.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// deadline is when the attempt's timeout passes while it has no TrainJob to count from: from
// Deadlines.Since, else from when the face began it (Step.Begun); zero without a timeout or
// either.
func (e *Engine) deadline(s Step) time.Time {
	d := s.Deadlines
	since := d.Since
	if since.IsZero() {
		since = s.Begun
	}
	if d.Timeout <= 0 || since.IsZero() {
		return time.Time{}
	}
	return since.Add(d.Timeout)
}

// deadlinesFor are the step's deadlines on tj. With Deadlines.Since set they are the step's;
// else they count from tj's creation (a restarted face keeps the deadline it had), or from
// when the face began the attempt (Step.Begun) where that is earlier (creates that failed for a
// while) or tj is not the step's own: a job it follows (share.go) was created by another step,
// maybe long before this one began.
func deadlinesFor(s Step, tj *trainer.TrainJob) trainjob.Deadlines {
	d := s.Deadlines
	if !d.Since.IsZero() || s.Begun.IsZero() {
		return d
	}
	if s.Identity.Adopts(tj) && tj.CreationTimestamp.Time.Before(s.Begun) {
		return d
	}
	d.Since = s.Begun
	return d
}

// reasonInvalid: the step itself is invalid (Status.Invalid names the field).
const reasonInvalid = "Invalid"

func invalid(s Step, err error) Status {
	return Status{Invalid: err, Observation: trainjob.Observation{Namespace: s.Namespace,
		Phase: trainjob.PhaseFailed, Reason: reasonInvalid, Message: err.Error()}}
}

// planningFailed says what a failure to plan does to the step: an invalid step ends it naming
// the field; a refusal no retry mends (no right to read the runtimes, no Trainer) ends it with
// the cause and the fix; anything else may pass and is looked at again.
func (e *Engine) planningFailed(s Step, err error) Status {
	if step.IsInvalid(err) {
		return invalid(s, err)
	}
	switch {
	case apierrors.IsForbidden(err):
		return failed(s, "", ReasonPlanningForbidden, fmt.Sprintf("planning the TrainJob: %v; grant the rules trainstep's install gives (%s)", err, e.rbacHint()))
	case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		return failed(s, "", ReasonPlanningFailed, fmt.Sprintf("planning the TrainJob: %v; is the Kubeflow Trainer (v2.0.1 or later, docs/install.md) installed?", err))
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsMethodNotSupported(err), apierrors.IsNotAcceptable(err):
		return failed(s, "", ReasonPlanningFailed, fmt.Sprintf("planning the TrainJob: the apiserver refused a request: %v", err))
	}
	return retrying(s, "", ReasonPlanningRetrying, "planning the TrainJob", err)
}

// createFailed is planningFailed for the create: a name that is someone else's, a refusal of
// the object itself (the Trainer's webhook, an admission policy) or of the face's right to
// create end the step; anything else may pass.
func (e *Engine) createFailed(s Step, name string, err error) Status {
	switch {
	case errors.Is(err, trainjob.ErrNameTaken):
		return failed(s, name, ReasonNameTaken, err.Error())
	case apierrors.IsForbidden(err):
		return failed(s, "", ReasonForbidden, fmt.Sprintf("trainstep may not create the TrainJob; grant it the rules trainstep's install gives (%s): %v", e.rbacHint(), err))
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return failed(s, "", ReasonTrainJobRefused, fmt.Sprintf("the apiserver refused the TrainJob, and would refuse it again: %v", err))
	}
	return retrying(s, "", ReasonCreateRetrying, "creating the TrainJob", err)
}

// retrying is trouble that may pass: the status says what failed, the apiserver's answer when
// there is one, and that it is tried again.
func retrying(s Step, name, reason, what string, err error) Status {
	var status apierrors.APIStatus
	why := ""
	if errors.As(err, &status) {
		why = fmt.Sprintf(" (the apiserver answered %d %s)", status.Status().Code, status.Status().Reason)
	}
	return Status{Err: err, Observation: trainjob.Observation{Namespace: s.Namespace, Name: name, Phase: trainjob.PhasePending,
		Reason: reason, Message: fmt.Sprintf("%s failed%s; retrying with back-off: %v", what, why, err)}}
}

func (e *Engine) rbacHint() string {
	if e.RBAC == "" {
		return "the install's RBAC rules"
	}
	return e.RBAC
}

// submitter reads from the apiserver (an adopted job must be the one there, not a cache's) and
// creates through the face's writer.
type submitter struct {
	client.Reader
	Writer client.Writer
}

func (c submitter) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.Writer.Create(ctx, obj, opts...)
}
