package trainjob

import (
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
)

// remoteJob is a TrainJob on a MultiKueue manager, admitted at t0, with the worker's status
// mirrored: jobs as given, conds added.
func remoteJob(jobs []trainer.JobStatus, conds ...metav1.Condition) *trainer.TrainJob {
	j := queuedJob(t0)
	j.Spec.ManagedBy = ptr.To(ManagedByMultiKueue)
	j.Spec.Trainer.NumNodes = ptr.To[int32](1)
	j.Status.JobsStatus = jobs
	j.Status.Conditions = append(j.Status.Conditions, conds...)
	return j
}

func TestDecideRemote(t *testing.T) {
	dispatched := workloadObject("tj-uid", []any{wlCond("QuotaReserved", "True", "QuotaReserved", ""), wlCond("Admitted", "True", "Admitted", "")}, nil)
	require.NoError(t, unstructured.SetNestedField(dispatched.Object, "worker-1", "status", "clusterName"))
	failed := at(cond(trainer.TrainJobFailed, metav1.ConditionTrue, "FailedJobs"), t0.Add(time.Minute))
	failed.Message = "jobset failed due to one or more job failures"
	cases := map[string]struct {
		tj        *trainer.TrainJob
		phase     Phase
		delete    bool
		mark      bool
		inMessage string
	}{
		"the worker's Jobs are ready: running, started, past startTimeout, not deleted": {
			tj:    remoteJob([]trainer.JobStatus{{Name: NodeJob, Ready: ptr.To[int32](1), Active: ptr.To[int32](1)}}),
			phase: PhaseRunning, mark: true, inMessage: "TrainJob job is running on cluster worker-1 (MultiKueue): jobs ready 1, done 0",
		},
		"nothing ready on the worker yet, past startTimeout: fails like a local job": {
			tj:    remoteJob([]trainer.JobStatus{{Name: NodeJob, Active: ptr.To[int32](1)}}),
			phase: PhaseFailed, delete: true, inMessage: "did not start within 10m0s (startTimeout)",
		},
		"suspended on the worker: dispatched, waits there": {
			tj: func() *trainer.TrainJob {
				j := remoteJob(nil)
				j.Status.Conditions = []metav1.Condition{at(cond(trainer.TrainJobSuspended, metav1.ConditionTrue, trainer.TrainJobSuspendedReason), t0)}
				return j
			}(),
			phase: PhaseSuspended, inMessage: "TrainJob job is dispatched to cluster worker-1 (MultiKueue) and waits there for its queue to admit it",
		},
		"failed on the worker: its cause, where, and what is not delivered": {
			tj:    remoteJob(nil, failed),
			phase: PhaseFailed, inMessage: "jobset failed due to one or more job failures; it ran on cluster worker-1 (MultiKueue): its log and return value stay on that cluster's pods (not delivered)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v := Decide(Snapshot{TrainJob: tc.tj, Workload: WorkloadOf(tc.tj, []unstructured.Unstructured{dispatched}), Now: t0.Add(time.Hour)},
				Deadlines{StartTimeout: 10 * time.Minute})
			require.Equal(t, tc.phase, v.Phase, v.Message)
			assert.Equal(t, tc.delete, v.Delete)
			assert.Equal(t, tc.mark, !v.MarkStarted.IsZero())
			assert.Contains(t, v.Message, tc.inMessage)
			out := v.Outputs()
			assert.Equal(t, "worker-1", out[OutCluster])
			assert.Equal(t, Undelivered, out[OutUndelivered])
			assert.Empty(t, v.TailPod, "no pod on the manager to read a log from")
		})
	}
}
