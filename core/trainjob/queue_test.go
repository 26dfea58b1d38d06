package trainjob

import (
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// queuedJob is a TrainJob Kueue queued: labelled with a LocalQueue, suspended at creation and,
// when resumed is not zero, admitted then (the Trainer's Suspended=False/Resumed condition).
func queuedJob(resumed time.Time) *trainer.TrainJob {
	j := followJob()
	j.UID = "tj-uid"
	j.Labels = map[string]string{LabelKueueQueue: "training"}
	if resumed.IsZero() {
		j.Spec.Suspend = ptr.To(true)
		j.Status.Conditions = []metav1.Condition{at(cond(trainer.TrainJobSuspended, metav1.ConditionTrue, trainer.TrainJobSuspendedReason), t0)}
		return j
	}
	j.Spec.Suspend = ptr.To(false)
	j.Status.Conditions = []metav1.Condition{at(cond(trainer.TrainJobSuspended, metav1.ConditionFalse, trainer.TrainJobResumedReason), resumed)}
	return j
}

func workloadObject(owner types.UID, conds, evictions []any) unstructured.Unstructured {
	u := unstructured.Unstructured{Object: map[string]any{"status": map[string]any{
		"conditions":      conds,
		"admission":       map[string]any{"clusterQueue": "gpu-cq"},
		"schedulingStats": map[string]any{"evictions": evictions},
	}}}
	u.SetGroupVersionKind(WorkloadGVK)
	u.SetName("trainjob-job-1a2b3")
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: "job", UID: owner}})
	return u
}

// inactive is u with spec.active false: deactivated.
func inactive(u unstructured.Unstructured) unstructured.Unstructured {
	u = *u.DeepCopy()
	u.Object["spec"] = map[string]any{"active": false}
	return u
}

func wlCond(typ, status, reason, msg string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg}
}

const insufficient = "couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu in flavor realstack-flavor, 8 more needed"

func TestDecideQueued(t *testing.T) {
	admitted := t0.Add(time.Hour) // an hour in the queue: far past the startTimeout
	startIn10m := Deadlines{StartTimeout: 10 * time.Minute, Timeout: 3 * time.Hour}
	waiting := workloadObject("tj-uid", []any{wlCond("QuotaReserved", "False", "Pending", insufficient)}, nil)
	preempted := workloadObject("tj-uid", []any{
		wlCond("QuotaReserved", "False", "Pending", insufficient),
		wlCond("Evicted", "True", "Preempted", "Preempted to accommodate a workload (UID: x) due to prioritization in the ClusterQueue"),
		wlCond("Preempted", "True", "InClusterQueue", "Preempted to accommodate a workload (UID: x) due to prioritization in the ClusterQueue"),
		wlCond("Requeued", "True", "Preempted", "Preempted"),
	}, []any{map[string]any{"reason": "Preempted", "underlyingCause": "", "count": int64(2)}, map[string]any{"reason": "PodsReadyTimeout", "underlyingCause": "", "count": int64(1)}})
	podsReady := workloadObject("tj-uid", []any{
		wlCond("QuotaReserved", "False", "Pending", "couldn't assign flavors"),
		wlCond("Evicted", "True", "PodsReadyTimeout", "Exceeded the PodsReady timeout default/job"),
		wlCond("Requeued", "True", "PodsReadyTimeout", ""),
	}, []any{map[string]any{"reason": "PodsReadyTimeout", "underlyingCause": "", "count": int64(1)}})
	cases := map[string]struct {
		snap        Snapshot
		workloads   []unstructured.Unstructured
		phase       Phase
		reason      string
		delete      bool
		wake        time.Time
		inMessage   []string
		preemptions int
		evictions   int
		queueWait   string
	}{
		"admitted after a queue wait longer than startTimeout, pods pending: startTimeout counts from the admission": {
			snap:  Snapshot{TrainJob: queuedJob(admitted), Pods: []corev1.Pod{unschedulable("job-node-0-0-x")}, Now: admitted.Add(time.Second)},
			phase: PhasePending, wake: admitted.Add(10 * time.Minute), queueWait: "3600",
		},
		"admitted, not started within startTimeout of the admission: fails": {
			snap:  Snapshot{TrainJob: queuedJob(admitted), Pods: []corev1.Pod{unschedulable("job-node-0-0-x")}, Now: admitted.Add(10 * time.Minute)},
			phase: PhaseFailed, reason: ReasonStartTimeout, delete: true, queueWait: "3600",
		},
		"queued: where and why, in Kueue's words": {
			snap:      Snapshot{TrainJob: queuedJob(time.Time{}), Now: t0.Add(2 * time.Hour)},
			workloads: []unstructured.Unstructured{waiting},
			phase:     PhaseSuspended, reason: "Queued", wake: t0.Add(3 * time.Hour),
			inMessage: []string{"TrainJob job is queued in LocalQueue training (Workload trainjob-job-1a2b3); waiting: " + insufficient},
		},
		"preempted: Kueue's reason, requeued, counted": {
			snap:      Snapshot{TrainJob: startedJob(t0), Now: t0.Add(2 * time.Hour)},
			workloads: []unstructured.Unstructured{preempted},
			phase:     PhaseSuspended, reason: "Preempted", preemptions: 2, evictions: 3,
			inMessage: []string{"TrainJob job was preempted by Kueue (InClusterQueue): Preempted to accommodate a workload (UID: x) due to prioritization in the ClusterQueue; requeued in LocalQueue training; waiting: " + insufficient},
		},
		"evicted by waitForPodsReady: Kueue's reason, requeued": {
			snap:      Snapshot{TrainJob: queuedJob(time.Time{}), Now: t0.Add(2 * time.Hour)},
			workloads: []unstructured.Unstructured{podsReady},
			phase:     PhaseSuspended, reason: "EvictedPodsReadyTimeout", evictions: 1,
			inMessage: []string{"TrainJob job was evicted by Kueue (PodsReadyTimeout): Exceeded the PodsReady timeout default/job; requeued in LocalQueue training"},
		},
		"deactivated by Kueue after its requeuing limit: ends in Kueue's words, deleted": {
			snap: Snapshot{TrainJob: queuedJob(time.Time{}), Now: t0.Add(2 * time.Hour)},
			workloads: []unstructured.Unstructured{inactive(workloadObject("tj-uid", []any{
				wlCond("QuotaReserved", "False", "Pending", "The workload is deactivated"),
				wlCond("Evicted", "True", "DeactivatedDueToRequeuingLimitExceeded", "The workload is deactivated due to exceeding the maximum number of re-queuing retries"),
				wlCond("Requeued", "False", "Deactivated", "The workload is deactivated due to exceeding the maximum number of re-queuing retries"),
			}, []any{map[string]any{"reason": "PodsReadyTimeout", "underlyingCause": "WaitForStart", "count": int64(2)}}))},
			phase: PhaseFailed, reason: "DeactivatedDueToRequeuingLimitExceeded", delete: true, evictions: 2,
			inMessage: []string{"TrainJob job will not run: Kueue deactivated its Workload trainjob-job-1a2b3 (DeactivatedDueToRequeuingLimitExceeded): The workload is deactivated due to exceeding the maximum number of re-queuing retries; Kueue admits a deactivated Workload again only when someone sets it active"},
		},
		"deactivated by a person: ends, saying so": {
			snap:      Snapshot{TrainJob: queuedJob(time.Time{}), Now: t0.Add(2 * time.Hour)},
			workloads: []unstructured.Unstructured{inactive(waiting)},
			phase:     PhaseFailed, reason: "Deactivated", delete: true,
			inMessage: []string{"someone deactivated (spec.active: false) its Workload trainjob-job-1a2b3 (Deactivated)"},
		},
		"another job's Workload is not this one's": {
			snap:      Snapshot{TrainJob: queuedJob(time.Time{}), Now: t0.Add(2 * time.Hour)},
			workloads: []unstructured.Unstructured{workloadObject("other-uid", []any{wlCond("QuotaReserved", "False", "Pending", insufficient)}, nil)},
			phase:     PhaseSuspended, reason: trainer.TrainJobSuspendedReason,
			inMessage: []string{"is suspended (held by a queue"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := tc.snap
			if tc.snap.TrainJob.Labels == nil {
				s.TrainJob.Labels = map[string]string{LabelKueueQueue: "training"}
				s.TrainJob.UID = "tj-uid"
				s.TrainJob.Spec.Suspend = ptr.To(true)
			}
			s.Workload = WorkloadOf(s.TrainJob, tc.workloads)
			v := Decide(s, startIn10m)
			require.Equal(t, tc.phase, v.Phase, v.Message)
			if tc.reason != "" {
				assert.Equal(t, tc.reason, v.Reason)
			}
			assert.Equal(t, tc.delete, v.Delete)
			assert.Equal(t, strings.HasPrefix(tc.reason, "Deactivated"), v.NoTail, "no pod's log explains a deactivation")
			if tc.reason == "Preempted" || strings.HasPrefix(tc.reason, "Evicted") {
				assert.True(t, v.Trouble, "an eviction is news")
			}
			if !tc.wake.IsZero() {
				assert.Equal(t, tc.wake, v.Wake)
			}
			for _, m := range tc.inMessage {
				assert.Contains(t, v.Message, m)
			}
			out := v.Outputs()
			assert.Equal(t, tc.queueWait, out[OutQueueWait])
			assert.Equal(t, tc.preemptions, v.Preemptions)
			assert.Equal(t, tc.evictions, v.Evictions)
		})
	}
}

// A preempted job's pods are deleted while its replacement's start: the ones going away are not
// running nodes (the step said "2/1 nodes" before).
func TestObserveDoesNotCountPodsGoingAway(t *testing.T) {
	old := runningNode(0, t0)
	old.Name = "job-node-0-0-old"
	old.DeletionTimestamp = ptr.To(metav1.NewTime(t0.Add(time.Minute)))
	j := startedJob(t0)
	j.Spec.Trainer.NumNodes = ptr.To[int32](1)
	o := Observe(j, []corev1.Pod{old, runningNode(0, t0.Add(time.Minute))})
	assert.Equal(t, int32(1), o.RunningNodes)
	assert.Equal(t, "TrainJob job is running: 1/1 nodes", o.Message)
}

func TestWorkloadMattersWhileItCanChangeTheStep(t *testing.T) {
	started := map[string]string{AnnotationStartedAt: "2026-01-01T00:00:00Z"}
	cases := map[string]struct {
		labels, annotations map[string]string
		suspend             bool
		want                bool
	}{
		"not queued":                 {want: false},
		"queued, not started":        {labels: map[string]string{LabelKueueQueue: "q"}, want: true},
		"queued, started, running":   {labels: map[string]string{LabelKueueQueue: "q"}, annotations: started, want: false},
		"queued, started, preempted": {labels: map[string]string{LabelKueueQueue: "q"}, annotations: started, suspend: true, want: true},
		"MultiKueue, started":        {labels: map[string]string{LabelKueueQueue: "q"}, annotations: started, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels, Annotations: tc.annotations}}
			tj.Spec.Suspend = ptr.To(tc.suspend)
			if name == "MultiKueue, started" {
				tj.Spec.ManagedBy = ptr.To(ManagedByMultiKueue)
			}
			assert.Equal(t, tc.want, WorkloadMatters(tj))
		})
	}
}
