package trainjob

import (
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)

func followJob(conds ...metav1.Condition) *trainer.TrainJob {
	return &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns", CreationTimestamp: metav1.NewTime(t0)},
		Spec:       trainer.TrainJobSpec{Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](2)}},
		Status:     trainer.TrainJobStatus{Conditions: conds},
	}
}

func at(c metav1.Condition, t time.Time) metav1.Condition {
	c.LastTransitionTime = metav1.NewTime(t)
	return c
}

func unschedulable(name string) corev1.Pod {
	p := pod("job", NodeJob, 0, corev1.PodPending)
	p.Name = name
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}}
	return p
}

func failedNode(name string, created time.Time, code int32) corev1.Pod {
	p := pod("job", NodeJob, 1, corev1.PodFailed)
	p.Name, p.CreationTimestamp = name, metav1.NewTime(created)
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "node", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error"}}}}
	return p
}

func imagePull() corev1.Pod {
	p := pod("job", NodeJob, 1, corev1.PodPending)
	p.Name = "job-node-0-1-pull"
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "node", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason: "ImagePullBackOff", Message: `Back-off pulling image "ghcr.io/x/missing:1"`}}}}
	return p
}

func runningNode(idx int, created time.Time) corev1.Pod {
	p := pod("job", NodeJob, idx, corev1.PodRunning)
	p.CreationTimestamp = metav1.NewTime(created)
	return p
}

func evicted(name string, idx int, created time.Time) corev1.Pod {
	p := pod("job", NodeJob, idx, corev1.PodFailed)
	p.Name, p.CreationTimestamp = name, metav1.NewTime(created)
	p.Status.Reason, p.Status.Message = "Evicted", "The node was low on resource: memory."
	return p
}

func replacement(name string, idx int, created time.Time) corev1.Pod {
	p := unschedulable(name)
	p.Labels[LabelCompletionIndex] = string(rune('0' + idx))
	p.CreationTimestamp = metav1.NewTime(created)
	return p
}

func oomRestarted(idx int, created time.Time) corev1.Pod {
	p := runningNode(idx, created)
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: NodeContainer, RestartCount: 1,
		State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}
	return p
}

// reported is tj with progress p reported at when (the Trainer's status server's lastUpdatedTime).
func reported(tj *trainer.TrainJob, when time.Time, p int32) *trainer.TrainJob {
	tj.Status.TrainerStatus = &trainer.TrainerStatus{ProgressPercentage: ptr.To(p), LastUpdatedTime: metav1.NewTime(when)}
	return tj
}

var bothRunning = []corev1.Pod{runningNode(0, t0), runningNode(1, t0)}

func startedJob(at time.Time) *trainer.TrainJob {
	return marked(followJob(), at.Format(time.RFC3339))
}

func TestDecide(t *testing.T) {
	complete := cond(trainer.TrainJobComplete, metav1.ConditionTrue, "AllJobsCompleted")
	failed := cond(trainer.TrainJobFailed, metav1.ConditionTrue, "FailedJobs")
	hour := Deadlines{Timeout: time.Hour}
	started := t0.Add(2 * time.Minute)
	startIn10m := Deadlines{StartTimeout: 10 * time.Minute}
	cases := map[string]struct {
		snap      Snapshot
		d         Deadlines
		phase     Phase
		reason    string
		delete    bool
		tailPod   string
		inMessage []string
		wake      time.Time
		mark      time.Time
		class     FailureClass
	}{
		"finished before the deadline, seen after it: the outcome wins": {
			snap:  Snapshot{TrainJob: followJob(at(complete, t0.Add(59*time.Minute))), Now: t0.Add(3 * time.Hour)},
			d:     hour,
			phase: PhaseSucceeded, reason: "AllJobsCompleted",
		},
		"finished after the deadline: timed out, nothing left to delete": {
			snap:  Snapshot{TrainJob: followJob(at(complete, t0.Add(61*time.Minute))), Now: t0.Add(2 * time.Hour)},
			d:     hour,
			phase: PhaseTimedOut, reason: ReasonTimeout, class: ClassTimeout, inMessage: []string{"after the step's timeout of 1h0m0s"},
		},
		"failed: the failing pod's tail is asked for": {
			snap:  Snapshot{TrainJob: followJob(at(failed, t0.Add(time.Minute))), Pods: []corev1.Pod{failedNode("job-node-0-1-a", t0, 1)}, Now: t0.Add(2 * time.Minute)},
			phase: PhaseFailed, reason: "FailedJobs", tailPod: "job-node-0-1-a",
		},
		"running past the deadline: timed out and deleted": {
			snap:  Snapshot{TrainJob: followJob(), Now: t0.Add(time.Hour)},
			d:     hour,
			phase: PhaseTimedOut, reason: ReasonTimeout, class: ClassTimeout, delete: true, inMessage: []string{"did not finish within 1h0m0s"},
		},
		"past the deadline, kept": {
			snap:  Snapshot{TrainJob: followJob(), Now: t0.Add(time.Hour)},
			d:     Deadlines{Timeout: time.Hour, KeepOnTimeout: true},
			phase: PhaseTimedOut, reason: ReasonTimeout, class: ClassTimeout, inMessage: []string{"kept (keepOnTimeout)"},
		},
		"deadlines start at Since when given": {
			snap:  Snapshot{TrainJob: followJob(), Now: t0.Add(time.Hour)},
			d:     Deadlines{Timeout: time.Hour, Since: t0.Add(30 * time.Minute)},
			phase: PhasePending, wake: t0.Add(90 * time.Minute),
		},
		"unschedulable: the scheduler's words while pending": {
			snap:  Snapshot{TrainJob: followJob(), Pods: []corev1.Pod{unschedulable("job-node-0-0-x")}, Now: t0.Add(time.Minute)},
			d:     Deadlines{Timeout: time.Hour, StartTimeout: 10 * time.Minute},
			phase: PhasePending, wake: t0.Add(10 * time.Minute),
			inMessage: []string{"node 0 (pod job-node-0-0-x) cannot be scheduled: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu."},
		},
		"image pull back-off: the kubelet's words": {
			snap:      Snapshot{TrainJob: followJob(), Pods: []corev1.Pod{imagePull()}, Now: t0.Add(time.Minute)},
			phase:     PhasePending,
			inMessage: []string{`container node: ImagePullBackOff: Back-off pulling image "ghcr.io/x/missing:1"`},
		},
		"a node failing and retried: which node, exit code, attempt, and its log": {
			snap: Snapshot{TrainJob: followJob(), Pods: []corev1.Pod{failedNode("job-node-0-1-a", t0, 1), failedNode("job-node-0-1-b", t0.Add(time.Second), 137)},
				Now: t0.Add(time.Minute)},
			phase: PhasePending, tailPod: "job-node-0-1-b",
			inMessage: []string{"node 1 (pod job-node-0-1-b) failed (exit code 137), attempt 2; the Job is retrying it"},
		},
		"start timeout: failed with the cause, deleted": {
			snap:  Snapshot{TrainJob: followJob(), Pods: []corev1.Pod{unschedulable("job-node-0-0-x")}, Now: t0.Add(10 * time.Minute)},
			d:     Deadlines{StartTimeout: 10 * time.Minute},
			phase: PhaseFailed, reason: ReasonStartTimeout, delete: true, class: ClassUnschedulable,
			inMessage: []string{"did not start within 10m0s (startTimeout)", "Insufficient nvidia.com/gpu"},
		},
		"start timeout with an image that will not pull: the image's": {
			snap:  Snapshot{TrainJob: followJob(), Pods: []corev1.Pod{imagePull()}, Now: t0.Add(10 * time.Minute)},
			d:     startIn10m,
			phase: PhaseFailed, reason: ReasonStartTimeout, delete: true, class: ClassImage,
		},
		"start timeout with a quota refusing the pods: refused, retryable": {
			snap: Snapshot{TrainJob: followJob(), Now: t0.Add(10 * time.Minute),
				Events: []corev1.Event{warning(kindJob, "job-node-0", ReasonFailedCreate, quotaMsg, t0.Add(time.Second))}},
			d:     startIn10m,
			phase: PhaseFailed, reason: ReasonStartTimeout, delete: true, class: ClassRefused,
		},
		"hung: its progress has not moved for hangTimeout: failed, deleted, with what it last said": {
			snap:  Snapshot{TrainJob: reported(startedJob(started), t0.Add(5*time.Minute), 40), Pods: bothRunning, Now: t0.Add(35 * time.Minute)},
			d:     Deadlines{HangTimeout: 30 * time.Minute},
			phase: PhaseFailed, reason: ReasonHung, delete: true, class: ClassHung, tailPod: "job-node-0",
			inMessage: []string{"is hung: its progress has not moved for 30m0s (hangTimeout); it last reported 40% at 2026-12-01T06:05:00Z"},
		},
		"reported within hangTimeout: looked at again when it would be hung": {
			snap:  Snapshot{TrainJob: reported(startedJob(started), t0.Add(5*time.Minute), 40), Pods: bothRunning, Now: t0.Add(10 * time.Minute)},
			d:     Deadlines{HangTimeout: 30 * time.Minute},
			phase: PhaseRunning, wake: t0.Add(35 * time.Minute),
		},
		"resumed since its last report: counts from the resume": {
			snap: Snapshot{TrainJob: func() *trainer.TrainJob {
				j := reported(startedJob(started), t0.Add(5*time.Minute), 40)
				j.Status.Conditions = append(j.Status.Conditions, at(cond(trainer.TrainJobSuspended, metav1.ConditionFalse, "Resumed"), t0.Add(50*time.Minute)))
				return j
			}(), Pods: bothRunning, Now: t0.Add(55 * time.Minute)},
			d:     Deadlines{HangTimeout: 30 * time.Minute},
			phase: PhaseRunning, wake: t0.Add(80 * time.Minute),
		},
		"never reported: never hung": {
			snap:  Snapshot{TrainJob: startedJob(started), Pods: bothRunning, Now: t0.Add(10 * time.Hour)},
			d:     Deadlines{HangTimeout: 30 * time.Minute},
			phase: PhaseRunning,
		},
		"start timeout does not fail a job held by a queue": {
			snap:  Snapshot{TrainJob: func() *trainer.TrainJob { j := followJob(); j.Spec.Suspend = ptr.To(true); return j }(), Now: t0.Add(time.Hour)},
			d:     Deadlines{StartTimeout: 10 * time.Minute},
			phase: PhaseSuspended,
		},
		"the Trainer's resource-creation Event, while pending": {
			snap: Snapshot{TrainJob: followJob(), Now: t0.Add(time.Minute), Events: []corev1.Event{{
				InvolvedObject: corev1.ObjectReference{Kind: trainer.TrainJobKind, Name: "job"}, Reason: ReasonResourcesCreationFailed,
				LastTimestamp: metav1.NewTime(t0.Add(30 * time.Second)),
				Message:       `admission webhook "vjobset.kb.io" denied the request: will exceed 63 characters`}}},
			phase: PhasePending, reason: ReasonResourcesCreationFailed, inMessage: []string{"will exceed 63 characters"},
		},
		"every node running, not yet recorded: the face records it": {
			snap:  Snapshot{TrainJob: followJob(), Pods: []corev1.Pod{runningNode(0, t0), runningNode(1, t0)}, Now: started},
			d:     startIn10m,
			phase: PhaseRunning, mark: started, inMessage: []string{"TrainJob job is running: 2/2 nodes"},
		},
		"recorded already: not again": {
			snap:  Snapshot{TrainJob: startedJob(started), Pods: []corev1.Pod{runningNode(0, t0), runningNode(1, t0)}, Now: t0.Add(time.Hour)},
			d:     startIn10m,
			phase: PhaseRunning,
		},
		"one node running of two, not started: waits for startTimeout": {
			snap:  Snapshot{TrainJob: followJob(), Pods: []corev1.Pod{runningNode(0, t0)}, Now: started},
			d:     startIn10m,
			phase: PhasePending, wake: t0.Add(10 * time.Minute),
		},
		"started, then a node evicted and its replacement unschedulable past startTimeout: keeps waiting and says so": {
			snap: Snapshot{TrainJob: startedJob(started), Now: t0.Add(30 * time.Minute), Pods: []corev1.Pod{
				evicted("job-node-0-0-a", 0, t0), runningNode(1, t0), replacement("job-node-0-0-b", 0, t0.Add(20*time.Minute))}},
			d:     startIn10m,
			phase: PhaseRunning, tailPod: "job-node-0-0-a",
			inMessage: []string{"TrainJob job is running: 1/2 nodes",
				"node 0 (pod job-node-0-0-a) was evicted, attempt 1: The node was low on resource: memory.; the Job is retrying it: its replacement (pod job-node-0-0-b) is pending: cannot be scheduled: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu."},
		},
		"a face restarted: recorded started, no pod running, past startTimeout: keeps waiting": {
			snap:  Snapshot{TrainJob: startedJob(started), Now: t0.Add(time.Hour)},
			d:     Deadlines{StartTimeout: 10 * time.Minute, Timeout: 2 * time.Hour},
			phase: PhaseRunning, wake: t0.Add(2 * time.Hour), inMessage: []string{"TrainJob job is running: 0/2 nodes"},
		},
		"a slow initializer past startTimeout: started, initializing": {
			snap:  Snapshot{TrainJob: followJob(), Pods: []corev1.Pod{pod("job", ModelInitializerJob, 0, corev1.PodRunning)}, Now: t0.Add(time.Hour)},
			d:     startIn10m,
			phase: PhaseRunning, mark: t0.Add(time.Hour), inMessage: []string{"TrainJob job is initializing: model-initializer running"},
		},
		"a node OOM-killed and restarted in place: reported while every node runs": {
			snap:  Snapshot{TrainJob: startedJob(started), Pods: []corev1.Pod{runningNode(0, t0), oomRestarted(1, t0)}, Now: t0.Add(time.Hour)},
			d:     startIn10m,
			phase: PhaseRunning, inMessage: []string{"TrainJob job is running: 2/2 nodes; node 1 (pod job-node-1) restarted: OOMKilled (exit code 137), attempt 2"},
		},
		"restarted by JobSet: the attempt, while the new pods start": {
			snap: Snapshot{TrainJob: startedJob(started), Now: t0.Add(time.Hour), Pods: func() []corev1.Pod {
				p := replacement("job-node-0-0-c", 0, t0.Add(40*time.Minute))
				p.Labels[LabelJobSetRestartAttempt] = "1"
				return []corev1.Pod{p}
			}()},
			d:     startIn10m,
			phase: PhaseRunning, inMessage: []string{"JobSet restarted the TrainJob's jobs: attempt 2", "node 0 (pod job-node-0-0-c) cannot be scheduled"},
		},
		"never started, past startTimeout: still fails and deletes": {
			snap:  Snapshot{TrainJob: followJob(), Pods: []corev1.Pod{runningNode(0, t0)}, Now: t0.Add(10 * time.Minute)},
			d:     startIn10m,
			phase: PhaseFailed, reason: ReasonStartTimeout, delete: true, class: ClassUnschedulable,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v := Decide(tc.snap, tc.d)
			assert.Equal(t, tc.mark, v.MarkStarted, "MarkStarted")
			assert.Equal(t, tc.phase, v.Phase, v.Message)
			if tc.reason != "" {
				assert.Equal(t, tc.reason, v.Reason)
			}
			assert.Equal(t, tc.delete, v.Delete)
			assert.Equal(t, tc.tailPod, v.TailPod)
			assert.Equal(t, tc.wake, v.Wake)
			if tc.class != "" {
				require.NotNil(t, v.Failure, "a failure has a class")
				assert.Equal(t, tc.class, v.Failure.Class)
			} else if !v.Phase.Terminal() {
				assert.Nil(t, v.Failure, "a step that has not ended has no failure class")
			}
			for _, m := range tc.inMessage {
				assert.Contains(t, v.Message, m)
			}
		})
	}
}
