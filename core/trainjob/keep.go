package trainjob

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AnnotationKept marks a TrainJob that a step's timeout left running because the step asked for
// keepOnTimeout. The face that timed the step out writes it; the processes that clean up after a
// step (the Argo plugin's reaper and the cluster's janitor, which run apart from the face that
// kept it) read it and leave the job alone. Its value says when and why.
const AnnotationKept = "trainstep.dev/kept"

// Kept reports whether a TrainJob was kept past its step's timeout: it stays until its user
// deletes it, and no part of trainstep deletes it.
func Kept(tj client.Object) bool {
	_, ok := tj.GetAnnotations()[AnnotationKept]
	return ok
}

// Keep marks a TrainJob kept (AnnotationKept, with why) and drops its owner references, so the
// garbage collector does not take it with the Workflow, CustomRun or step pod that made it: the
// user asked for the job to outlive the step, so it outlives what ran the step too. One merge
// patch; a gone job is no error.
func Keep(ctx context.Context, c client.Writer, namespace, name, why string) error {
	err := patchMetadata(ctx, c, namespace, name, map[string]any{
		"annotations":     map[string]string{AnnotationKept: why},
		"ownerReferences": nil,
	})
	if err != nil {
		return fmt.Errorf("marking TrainJob %s/%s kept (keepOnTimeout): %w", namespace, name, err)
	}
	return nil
}

// keepVerdict carries out the keep a timed-out verdict asks for. A refusal no retry can fix (the
// face may not patch TrainJobs: RBAC from before kept jobs were recorded) is said in the message
// instead of holding the step open: the job still runs, but cleanup may take it. Any other
// failure is returned: the face looks again.
func keepVerdict(ctx context.Context, c client.Writer, obs Observation, why string) (Observation, bool, error) {
	err := Keep(ctx, c, obs.Namespace, obs.Name, why)
	switch {
	case err == nil:
		return obs, true, nil
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		obs.Message += fmt.Sprintf("; but it could not be marked kept, so trainstep's cleanup may still delete it "+
			"(grant patch on trainjobs to trainstep's ServiceAccount): %v", err)
		return obs, false, nil
	}
	return obs, false, err
}
