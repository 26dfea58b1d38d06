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
	// The manager's Kueue admitted it (and dispatched it) 55 minutes after its creation: it
	// waited in the manager's queue; its Trainer records no resume (it leaves the job alone).
	dispatchedLate := workloadObject("tj-uid", []any{wlCond("QuotaReserved", "True", "QuotaReserved", ""),
		map[string]any{"type": "Admitted", "status": "True", "reason": "Admitted", "lastTransitionTime": t0.Add(55 * time.Minute).UTC().Format(time.RFC3339)}}, nil)
	require.NoError(t, unstructured.SetNestedField(dispatchedLate.Object, "worker-1", "status", "clusterName"))
	unmirrored := func() *trainer.TrainJob {
		j := remoteJob(nil)
		j.Status.Conditions = nil // nothing mirrored from the worker yet
		return j
	}
	cases := map[string]struct {
		tj         *trainer.TrainJob
		workload   *unstructured.Unstructured
		noWorkload bool
		phase      Phase
		delete     bool
		mark       bool
		wake       time.Time
		inMessage  string
		queueWait  string
	}{
		"recorded started, no Job ready now (a worker pod restarting), past startTimeout: running, not deleted": {
			tj: func() *trainer.TrainJob {
				j := remoteJob([]trainer.JobStatus{{Name: NodeJob, Active: ptr.To[int32](1)}})
				j.Annotations = map[string]string{AnnotationStartedAt: t0.Add(time.Minute).UTC().Format(time.RFC3339)}
				return j
			}(),
			phase: PhaseRunning, inMessage: "TrainJob job is running on cluster worker-1 (MultiKueue): no job ready now (jobs active 1, a pod there is restarting)",
			queueWait: "0",
		},
		"dispatched after a long wait in the manager's queue, nothing mirrored yet: startTimeout counts from the dispatch": {
			tj: unmirrored(), workload: &dispatchedLate,
			phase: PhasePending, wake: t0.Add(65 * time.Minute), inMessage: "is starting on cluster worker-1 (MultiKueue)",
			queueWait: "3300",
		},
		"dispatched, its Workload not read and nothing mirrored: startTimeout cannot count yet": {
			tj: unmirrored(), noWorkload: true,
			phase: PhasePending, inMessage: "is starting on a worker cluster (MultiKueue)",
		},
		"the worker's Jobs are ready: running, started, past startTimeout, not deleted": {
			tj:    remoteJob([]trainer.JobStatus{{Name: NodeJob, Ready: ptr.To[int32](1), Active: ptr.To[int32](1)}}),
			phase: PhaseRunning, mark: true, inMessage: "TrainJob job is running on cluster worker-1 (MultiKueue): jobs ready 1, done 0",
			queueWait: "0",
		},
		"nothing ready on the worker yet, past startTimeout: fails like a local job": {
			tj:    remoteJob([]trainer.JobStatus{{Name: NodeJob, Active: ptr.To[int32](1)}}),
			phase: PhaseFailed, delete: true, inMessage: "did not start within 10m0s (startTimeout)",
			queueWait: "0",
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
			queueWait: "0",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := dispatched
			if tc.workload != nil {
				wl = *tc.workload
			}
			var w *Workload
			if !tc.noWorkload {
				w = WorkloadOf(tc.tj, []unstructured.Unstructured{wl})
			}
			v := Decide(Snapshot{TrainJob: tc.tj, Workload: w, Now: t0.Add(time.Hour)},
				Deadlines{StartTimeout: 10 * time.Minute})
			require.Equal(t, tc.phase, v.Phase, v.Message)
			assert.Equal(t, tc.delete, v.Delete)
			assert.Equal(t, tc.mark, !v.MarkStarted.IsZero())
			assert.Equal(t, tc.wake, v.Wake)
			assert.Contains(t, v.Message, tc.inMessage)
			out := v.Outputs()
			if !tc.noWorkload {
				assert.Equal(t, "worker-1", out[OutCluster])
			}
			assert.Equal(t, Undelivered, out[OutUndelivered])
			assert.Equal(t, tc.queueWait, out[OutQueueWait], "the wait in the manager's queue, from Kueue's admission")
			assert.Empty(t, v.TailPod, "no pod on the manager to read a log from")
		})
	}
}

// On a MultiKueue manager the mirrored status is all a step reads: the Failed condition JobSet
// wrote on the worker (the Trainer copies it, first failed Job and all), the worker's jobsStatus,
// and what trainstep recorded on the job (its start, its accelerators).
func TestRemoteFailureAndCost(t *testing.T) {
	dispatched := workloadObject("tj-uid", []any{wlCond("QuotaReserved", "True", "QuotaReserved", ""), wlCond("Admitted", "True", "Admitted", "")}, nil)
	require.NoError(t, unstructured.SetNestedField(dispatched.Object, "worker-1", "status", "clusterName"))
	ended := func(typ, reason, msg string) metav1.Condition {
		c := at(cond(typ, metav1.ConditionTrue, reason), t0.Add(time.Hour))
		c.Message = msg
		return c
	}
	failed := func(reason, msg string) metav1.Condition { return ended(trainer.TrainJobFailed, reason, msg) }
	one := ptr.To[int32](1)
	cases := map[string]struct {
		jobs      []trainer.JobStatus
		end       metav1.Condition
		class     string
		retryable string
		training  string
		gpuHours  string
	}{
		"the trainer's Job failed: why is on the worker's pods": {
			jobs:  []trainer.JobStatus{{Name: NodeJob, Failed: one}},
			end:   failed("FailedJobs", "jobset failed due to one or more job failures (first failed job: job-node-0)"),
			class: "unknown", retryable: "false", training: "3300", gpuHours: "3.667",
		},
		"past the JobSet's restarts on the trainer's Job": {
			jobs:  []trainer.JobStatus{{Name: NodeJob, Failed: one}},
			end:   failed("ReachedMaxRestarts", "jobset failed due to reaching max number of restarts (first failed job: job-node-0)"),
			class: "unknown", retryable: "false", training: "3300", gpuHours: "3.667",
		},
		"the dataset initializer failed first: never trained": {
			jobs:  []trainer.JobStatus{{Name: DatasetInitializerJob, Failed: one}, {Name: NodeJob}},
			end:   failed("FailedJobs", "jobset failed due to one or more job failures (first failed job: job-dataset-initializer-0)"),
			class: "initializer", retryable: "true", training: "0", gpuHours: "0",
		},
		"a failure policy rule failed it on the model initializer": {
			jobs:  []trainer.JobStatus{{Name: ModelInitializerJob, Failed: one}},
			end:   failed("FailJobSetFailurePolicyAction", "applying FailJobSet failure policy action (first failed job: job-model-initializer-0)"),
			class: "initializer", retryable: "true", training: "0", gpuHours: "0",
		},
		"the Trainer's deadline": {
			jobs:  []trainer.JobStatus{{Name: NodeJob, Ready: one, Active: one}},
			end:   failed("DeadlineExceeded", "TrainJob exceeded its active deadline"),
			class: "timeout", retryable: "false", training: "3300", gpuHours: "3.667",
		},
		"succeeded: trained from its recorded start": {
			jobs:     []trainer.JobStatus{{Name: NodeJob, Succeeded: one}},
			end:      ended(trainer.TrainJobComplete, "AllJobsCompleted", "jobset completed successfully"),
			training: "3300", gpuHours: "3.667",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			j := remoteJob(tc.jobs, tc.end)
			j.Annotations = map[string]string{AnnotationStartedAt: t0.Add(5 * time.Minute).UTC().Format(time.RFC3339), AnnotationAccelerators: "4"}
			cached, err := TrimTrainJob(j)
			require.NoError(t, err)
			tj := cached.(*trainer.TrainJob)
			v := Decide(Snapshot{TrainJob: tj, Workload: WorkloadOf(tj, []unstructured.Unstructured{dispatched}), Now: t0.Add(2 * time.Hour)}, Deadlines{})
			out := v.Outputs()
			assert.Equal(t, tc.class, out[OutFailureClass])
			assert.Equal(t, tc.retryable, out[OutRetryable])
			assert.Equal(t, tc.training, out[OutTraining])
			assert.Equal(t, tc.gpuHours, out[OutGPUHours], "4 accelerators × 1 node × the training")
		})
	}
}
