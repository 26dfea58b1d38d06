package tekton

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
)

// Reasons for a failure to plan the TrainJob.
const (
	// ReasonPlanningForbidden: the controller's RBAC does not let it read what planning needs
	// (the TrainJob CRD, runtimes): a release's new rule not applied on upgrade, say.
	ReasonPlanningForbidden = "PlanningForbidden"
	// ReasonPlanningFailed: planning failed in a way no retry mends (the Trainer not installed).
	ReasonPlanningFailed = "PlanningFailed"
	// ReasonPlanningRetrying (Unknown): planning failed in a way that may pass; it is retried.
	ReasonPlanningRetrying = "PlanningRetrying"
	// ReasonTrainJobRefused: the apiserver or an admission check (the Trainer's webhook, a
	// policy) refused the TrainJob as invalid; the same request would be refused again.
	ReasonTrainJobRefused = "TrainJobRefused"
	// ReasonCreateRetrying (Unknown): creating the TrainJob failed in a way that may pass.
	ReasonCreateRetrying = "TrainJobCreateRetrying"
)

// planningFailure says what a failure to plan the TrainJob does to the run. A permanent one
// (the controller's RBAC lacks a rule, the Trainer's CRD is missing or refuses the request) ends
// the run at once with the cause and the fix: retrying cannot help, and the cause would otherwise
// sit only in the controller's log while the run said "planning" until its timeout. Anything else
// (a timeout, a 5xx, a conflict, throttling, a connection reset) may pass: the run stays Unknown
// with a message saying it is retrying and why, and the reconcile is retried with back-off.
type planningFailure struct {
	permanent bool
	reason    string
	message   string
}

func classifyPlanning(err error) planningFailure {
	switch {
	case apierrors.IsForbidden(err):
		return planningFailure{permanent: true, reason: ReasonPlanningForbidden, message: fmt.Sprintf(
			"planning the TrainJob: the controller's ServiceAccount lacks a rule of manifests/tekton/rbac.yaml: %v; "+
				"apply this release's manifests/tekton/rbac.yaml (kubectl apply -k manifests/tekton), then rerun the PipelineRun", err)}
	case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		return planningFailure{permanent: true, reason: ReasonPlanningFailed, message: fmt.Sprintf(
			"planning the TrainJob: %v; is the Kubeflow Trainer (v2.1 or later) installed? Install it, then rerun the PipelineRun", err)}
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsMethodNotSupported(err), apierrors.IsNotAcceptable(err):
		return planningFailure{permanent: true, reason: ReasonPlanningFailed, message: fmt.Sprintf(
			"planning the TrainJob: the apiserver refused a request: %v", err)}
	}
	return retrying(ReasonPlanningRetrying, "planning the TrainJob", err)
}

// classifyCreate is classifyPlanning for the TrainJob's create, once planned: a refusal of the
// object itself (Invalid, BadRequest: the Trainer's webhook or an admission policy) ends the run
// with the apiserver's words; Forbidden is the controller's RBAC (ReasonForbidden); anything
// else may pass and is retried, saying so.
func classifyCreate(err error) planningFailure {
	switch {
	case apierrors.IsForbidden(err):
		return planningFailure{permanent: true, reason: ReasonForbidden, message: fmt.Sprintf(
			"the controller may not create the TrainJob; grant its ServiceAccount the rules in manifests/tekton/rbac.yaml: %v", err)}
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return planningFailure{permanent: true, reason: ReasonTrainJobRefused, message: fmt.Sprintf(
			"the apiserver refused the TrainJob, and would refuse it again: %v", err)}
	}
	return retrying(ReasonCreateRetrying, "creating the TrainJob", err)
}

// retrying is a failure that may pass: the run says what failed, the apiserver's answer when
// there is one, and that it is retried.
func retrying(reason, what string, err error) planningFailure {
	var status apierrors.APIStatus
	why := ""
	if errors.As(err, &status) {
		why = fmt.Sprintf(" (the apiserver answered %d %s)", status.Status().Code, status.Status().Reason)
	}
	return planningFailure{reason: reason, message: fmt.Sprintf("%s failed%s; retrying with back-off: %v", what, why, err)}
}
