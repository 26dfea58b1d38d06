package tekton

import (
	"github.com/trainstep/trainstep/core/lifecycle"
	"github.com/trainstep/trainstep/core/step"
)

// APIVersion and Kind are what a PipelineTask's taskRef (or taskSpec) names to run a trainstep
// step as a Tekton custom task: the step file's own apiVersion and kind.
const (
	APIVersion = step.APIVersion
	Kind       = step.Kind
)

// Condition reasons on the CustomRun's Succeeded condition. While the TrainJob runs the reason
// is the core's phase (Pending, Suspended, Running); on failure it is the core's reason (the
// Trainer's, e.g. FailedJobs). Cancel and timeout use the exact strings Tekton matches.
const (
	ReasonStarted       = "Started"
	ReasonRetrying      = "Retrying"
	ReasonSucceeded     = "Succeeded"
	ReasonFailed        = "Failed"
	ReasonInvalidParams = "InvalidParams"
	// ReasonWorkspaceNotSupported is Tekton's own reason for a workspace a custom task cannot use
	// (trainstep mounts persistentVolumeClaim, secret, configMap and emptyDir bindings).
	ReasonWorkspaceNotSupported = "CustomRunWorkspaceNotSupported"
	ReasonTrainJobDeleted       = lifecycle.ReasonTrainJobDeleted
	ReasonNameTaken             = lifecycle.ReasonNameTaken
	// ReasonForbidden: the controller's RBAC does not let it create the TrainJob.
	ReasonForbidden = lifecycle.ReasonForbidden
	// The failures to plan and create the TrainJob (lifecycle's words).
	ReasonPlanningForbidden = lifecycle.ReasonPlanningForbidden
	ReasonPlanningFailed    = lifecycle.ReasonPlanningFailed
	ReasonPlanningRetrying  = lifecycle.ReasonPlanningRetrying
	ReasonTrainJobRefused   = lifecycle.ReasonTrainJobRefused
	ReasonCreateRetrying    = lifecycle.ReasonCreateRetrying
	ReasonCancelled         = "CustomRunCancelled"
	ReasonTimedOut          = "CustomRunTimedOut"
	ReasonTrainJobDeletion  = "TrainJobDeleted"
)

// maxMessage bounds a condition message; the log tail is at the end, so the middle goes.
const maxMessage = 8 << 10

func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	const cut = "\n…(truncated)…\n"
	head := maxMessage / 4
	return s[:head] + cut + s[len(s)-(maxMessage-head-len(cut)):]
}
