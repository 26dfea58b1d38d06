package lifecycle

import "github.com/trainstep/trainstep/core/trainjob"

// classified gives a step that ended without success its failure class (docs/failures.md): the
// one its evidence named (a failed pod, the pods that kept it from starting: trainjob), else the
// one its reason names. A step that has not ended, or succeeded, has none.
func classified(st Status) Status {
	switch {
	case st.Err != nil:
	case st.Stopped:
		st.Failure = trainjob.Classified(trainjob.ClassCancelled)
	case st.Invalid != nil:
		st.Failure = trainjob.Classified(trainjob.ClassInvalid)
	case st.Phase != trainjob.PhaseFailed && st.Phase != trainjob.PhaseTimedOut:
		st.Failure = nil
	case st.Failure == nil:
		st.Failure = reasonFailure(st.Reason)
	}
	return st
}

// reasonFailure is the class of a failure by its reason alone: the Trainer's, Kueue's, or the
// lifecycle's own; unknown when the reason does not say.
func reasonFailure(reason string) *trainjob.Failure {
	if f := trainjob.ReasonFailure(reason); f != nil {
		return f
	}
	switch reason {
	case ReasonTrainJobDeleted:
		return trainjob.Classified(trainjob.ClassCancelled)
	case ReasonForbidden, ReasonPlanningForbidden:
		return trainjob.Classified(trainjob.ClassRefused) // trainstep's own RBAC: no retry grants it
	case ReasonTrainJobRefused, ReasonNameTaken, ReasonPlanningFailed, reasonInvalid:
		return trainjob.Classified(trainjob.ClassInvalid)
	}
	return trainjob.Classified(trainjob.ClassUnknown)
}
