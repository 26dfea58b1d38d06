package trainjob

import (
	"fmt"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/utils/ptr"
)

// MultiKueue: on a management cluster Kueue dispatches a queued TrainJob (spec.managedBy
// ManagedByMultiKueue, set by Kueue's webhook) to a worker cluster, which runs it, and copies the
// worker's TrainJob status whole onto the manager's. The manager has no JobSet and no pods: a
// step there reads whether the job runs from the mirrored status (status.jobsStatus), the worker
// cluster from the manager's Workload (status.clusterName), and says what it cannot deliver: the
// log tail and the training function's return value are on the worker's pods. What it cost is
// read from the job alone too: its accelerators from the planner's annotation, its training from
// when trainstep recorded it started (remoteTrainingStart), and why it failed from the mirrored
// Failed condition (jobSetFailure).

// ManagedByMultiKueue is spec.managedBy of a TrainJob another cluster runs through MultiKueue.
const ManagedByMultiKueue = "kueue.x-k8s.io/multikueue"

// Undelivered names, for OutUndelivered, what a step on a MultiKueue manager cannot deliver.
const Undelivered = "result, log"

// Remote reports whether another cluster runs the TrainJob (MultiKueue).
func Remote(tj *trainer.TrainJob) bool {
	return ptr.Deref(tj.Spec.ManagedBy, "") == ManagedByMultiKueue
}

// remote is the observation of a TrainJob a worker cluster runs, from its mirrored status:
// Running (and started) once one of the worker's Jobs is ready or done, and Running still once
// recorded started (AnnotationStartedAt) while none is, else Pending. Finished
// and suspended jobs are left as Observe read their mirrored conditions; every message says
// where the job runs and what cannot be delivered.
func (o Observation) remote(tj *trainer.TrainJob, cluster string) Observation {
	o.Remote, o.Cluster = true, cluster
	o.Undelivered = Undelivered
	o.Result, o.FailedPod, o.Node0Pod = "", "", ""
	if o.TrainingStart == nil {
		o.TrainingStart = remoteTrainingStart(tj)
	}
	where := "on a worker cluster (MultiKueue)"
	if cluster != "" {
		where = fmt.Sprintf("on cluster %s (MultiKueue)", cluster)
	}
	switch {
	case o.Phase.Terminal():
		o.Message += fmt.Sprintf("; it ran %s: its log and return value stay on that cluster's pods (not delivered)", where)
		return o
	case o.Phase == PhaseSuspended:
		return o
	}
	var ready, done, active int32
	for _, js := range tj.Status.JobsStatus {
		ready += ptr.Deref(js.Ready, 0)
		done += ptr.Deref(js.Succeeded, 0)
		active += ptr.Deref(js.Active, 0)
	}
	switch {
	case ready > 0 || done > 0:
		o.Phase, o.Reason, o.Started = PhaseRunning, "Running", true
		o.Message = fmt.Sprintf("TrainJob %s is running %s: jobs ready %d, done %d", tj.Name, where, ready, done)
	case !StartedAt(tj).IsZero():
		// It ran: JobSet counts a Job ready only while every pod of it is, so a worker pod
		// restarting (evicted, OOM-killed, retried) leaves none ready for a while. A started job
		// is not starting again, and startTimeout no longer applies to it.
		o.Phase, o.Reason = PhaseRunning, "Running"
		o.Message = fmt.Sprintf("TrainJob %s is running %s: no job ready now (jobs active %d, a pod there is restarting)", tj.Name, where, active)
	default:
		o.Phase, o.Reason = PhasePending, "Pending"
		o.Message = fmt.Sprintf("TrainJob %s is starting %s: jobs active %d", tj.Name, where, active)
	}
	if o.Progress != nil {
		o.Message += fmt.Sprintf(", %d%% done", *o.Progress)
	}
	return o
}

// remoteTrainingStart is when a worker cluster's job began training, as near as the manager can
// tell: no pod here shows a container's start, so it is when trainstep recorded the job started
// (AnnotationStartedAt: the look that first saw one of its Jobs ready in the mirrored status,
// an initializer's included), once a Job that is not an initializer's shows it ran (ready, done
// or failed). Nil before that: a job whose initializer failed never trained.
func remoteTrainingStart(tj *trainer.TrainJob) *time.Time {
	started := StartedAt(tj)
	if started.IsZero() {
		return nil
	}
	for _, js := range tj.Status.JobsStatus {
		if js.Name == DatasetInitializerJob || js.Name == ModelInitializerJob {
			continue
		}
		if ptr.Deref(js.Ready, 0)+ptr.Deref(js.Succeeded, 0)+ptr.Deref(js.Failed, 0) > 0 {
			return &started
		}
	}
	return nil
}
