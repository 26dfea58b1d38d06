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
	var status apierrors.APIStatus
	why := ""
	if errors.As(err, &status) {
		why = fmt.Sprintf(" (the apiserver answered %d %s)", status.Status().Code, status.Status().Reason)
	}
	return planningFailure{reason: ReasonPlanningRetrying, message: fmt.Sprintf(
		"planning the TrainJob failed%s; retrying with back-off: %v", why, err)}
}
