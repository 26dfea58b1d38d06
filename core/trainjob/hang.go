package trainjob

import (
	"fmt"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/trainstep/trainstep/core/trainers"
)

// ReasonHung: the job ran and its reported progress stopped moving for the step's hangTimeout.
const ReasonHung = "Hung"

// HangOffNote is what a running step with hangTimeout says where its pods show the Trainer's
// TrainJobStatus gate off (ProgressOffNote): no report reaches the TrainJob there.
const HangOffNote = "so hangTimeout never fires for this job"

// hangAt is when a running job's progress counts as stopped: hangTimeout after its last report
// (status.trainerStatus.lastUpdatedTime, which rank 0 sends with every post and the Trainer's
// status server applies), or after its last resume when that is later (a preempted job
// re-admitted reports again only once it runs). Zero when the step has no hangTimeout, the job
// does not run, or its function never reported (functionReported): a job whose function does
// not report has no progress to stop.
func hangAt(tj *trainer.TrainJob, obs Observation, hangTimeout time.Duration) time.Time {
	ts := tj.Status.TrainerStatus
	if hangTimeout <= 0 || obs.Phase != PhaseRunning || !functionReported(ts) {
		return time.Time{}
	}
	from := ts.LastUpdatedTime.Time
	if r := LastResumed(tj); r.After(from) {
		from = r
	}
	return from.Add(hangTimeout)
}

// functionReported says the status holds a post of the function's: anything but the one the
// command script makes as a resumed run starts, before the function runs, which carries the
// checkpoint's name alone (trainers.ResumedFromMetric). Every post of report() carries its
// count (trainers.ReportsMetric), so a bare report() is one too.
func functionReported(ts *trainer.TrainerStatus) bool {
	if ts == nil || ts.LastUpdatedTime.IsZero() {
		return false
	}
	resumeOnly := ts.ProgressPercentage == nil && ts.EstimatedRemainingSeconds == nil &&
		len(ts.Metrics) == 1 && ts.Metrics[0].Name == trainers.ResumedFromMetric
	return !resumeOnly
}

// hung fails a job whose progress stopped: it is deleted (it holds its nodes, doing nothing),
// and the message says what it last reported and when, with the end of node 0's log.
func hung(v Verdict, tj *trainer.TrainJob, now time.Time, hangTimeout time.Duration) Verdict {
	last := tj.Status.TrainerStatus.LastUpdatedTime.UTC().Format(time.RFC3339)
	what := v.ProgressLine()
	if what == "" {
		what = "no progress figure"
	}
	v.Phase, v.Reason = PhaseFailed, ReasonHung
	v.Message = fmt.Sprintf("TrainJob %s is hung: its progress has not moved for %s (hangTimeout); it last reported %s at %s",
		tj.Name, hangTimeout, what, last)
	// Node 0's log says where it stopped.
	v.TailPod, v.TailContainer = v.Node0Pod, NodeContainer
	v.Failure = Classified(ClassHung)
	v.CompletionTime = &now
	v.Delete, v.Trouble = true, false
	return v
}
