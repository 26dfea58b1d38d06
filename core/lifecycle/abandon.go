package lifecycle

import (
	"context"
	"fmt"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
)

// Abandon ends, from outside any look, the step of a TrainJob whose pipeline stopped or went
// away while it trained (an Argo workflow shut down or finished, read by the plugin's reaper and
// the cluster's janitor): the job is deleted, as a stopped step's is, unless it already ended, is
// being deleted, or was kept past its timeout (keepOnTimeout). ownerUID is the pipeline's: a
// job other pipelines' steps follow (share.go) loses only its hold and runs on for them. tj is
// the job as the caller read it (from a cache, say); the write is preconditioned on that
// version, so a keep written since by the face that timed the step out, in another process, or
// a hold another step added, fails it with a Conflict instead of deleting the job: the caller
// reads again. deleted is false when nothing was deleted.
func Abandon(ctx context.Context, w client.Writer, tj *trainer.TrainJob, ownerUID string) (deleted bool, err error) {
	if !Abandonable(tj) {
		return false, nil
	}
	// A job no other step holds is deleted, preconditioned on tj's version.
	deleted, _, err = release(ctx, w, tj, ownerUID)
	if err != nil {
		return false, fmt.Errorf("ending the step of a stopped pipeline: %w", err)
	}
	return deleted, nil
}

// Abandonable says whether Abandon would delete tj: it still trains, is not being deleted and
// was not kept. A caller that must read more to decide (the sweep reads each job's Workflow
// from the apiserver) asks first and reads only for these.
func Abandonable(tj *trainer.TrainJob) bool {
	return tj.DeletionTimestamp == nil && !trainjob.Kept(tj) && !trainjob.Observe(tj, nil).Phase.Terminal()
}
