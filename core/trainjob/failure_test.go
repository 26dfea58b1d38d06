package trainjob

import (
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A failed pod is classified by what Kubernetes recorded on it.
func TestPodFailure(t *testing.T) {
	disrupted := func(reason, podReason string) corev1.Pod {
		p := failedNode("job-node-0", t0, 137)
		p.Status.Reason = podReason
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: reason}}
		return p
	}
	oomKilled := failedNode("job-node-0", t0, 137)
	oomKilled.Status.ContainerStatuses[0].State.Terminated.Reason = "OOMKilled"
	oomBefore := oomRestarted(0, t0)
	oomBefore.Status.Phase = corev1.PodFailed
	initializer := failedNode("job-dataset-initializer-0", t0, 1)
	initializer.Labels[LabelReplicatedJob] = DatasetInitializerJob
	rejected := pod("job", NodeJob, 0, corev1.PodFailed)
	rejected.Status.Reason = "OutOfnvidia.com/gpu"
	shutdown := pod("job", NodeJob, 0, corev1.PodFailed)
	shutdown.Status.Reason = "Terminated"
	cases := map[string]struct {
		pod       corev1.Pod
		class     FailureClass
		retryable bool
	}{
		"a non-zero exit is the code's":             {pod: failedNode("job-node-0", t0, 1), class: ClassCode},
		"OOMKilled":                                 {pod: oomKilled, class: ClassOOM, retryable: true},
		"OOMKilled before the last restart":         {pod: oomBefore, class: ClassOOM, retryable: true},
		"preempted by the scheduler":                {pod: disrupted(corev1.PodReasonPreemptionByScheduler, ""), class: ClassPreempted, retryable: true},
		"evicted through the Eviction API":          {pod: disrupted("EvictionByEvictionAPI", ""), class: ClassEvicted, retryable: true},
		"the taint manager: node unreachable":       {pod: disrupted("DeletionByTaintManager", ""), class: ClassNodeLost, retryable: true},
		"pod GC: the node is gone":                  {pod: disrupted("DeletionByPodGC", ""), class: ClassNodeLost, retryable: true},
		"the kubelet under node pressure":           {pod: disrupted(corev1.PodReasonTerminationByKubelet, "Evicted"), class: ClassEvicted, retryable: true},
		"the kubelet at node shutdown":              {pod: disrupted(corev1.PodReasonTerminationByKubelet, "Terminated"), class: ClassNodeLost, retryable: true},
		"the kubelet for a critical pod":            {pod: disrupted(corev1.PodReasonTerminationByKubelet, "Preempting"), class: ClassPreempted, retryable: true},
		"evicted with no condition (older kubelet)": {pod: evicted("job-node-0", 0, t0), class: ClassEvicted, retryable: true},
		"a node shut down":                          {pod: shutdown, class: ClassNodeLost, retryable: true},
		"refused at the node's admission":           {pod: rejected, class: ClassEvicted, retryable: true},
		"an initializer's failure is its own":       {pod: initializer, class: ClassInitializer, retryable: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := podFailure(&tc.pod)
			require.NotNil(t, f)
			assert.Equal(t, Failure{Class: tc.class, Retryable: tc.retryable}, *f)
		})
	}
	assert.Nil(t, podFailure(new(pod("job", NodeJob, 0, corev1.PodFailed))), "a pod that records nothing says nothing")
}

// A job that did not start within its startTimeout is classified by why its pods wait.
func TestStuckFailure(t *testing.T) {
	waiting := func(reason string) corev1.Pod {
		p := imagePull()
		p.Status.ContainerStatuses[0].State.Waiting.Reason = reason
		return p
	}
	cases := map[string]struct {
		pods             []corev1.Pod
		refused, missing string
		want             Failure
	}{
		"no room":                 {pods: []corev1.Pod{unschedulable("p")}, want: Failure{ClassUnschedulable, true}},
		"no pods at all":          {want: Failure{ClassUnschedulable, true}},
		"an image to pull":        {pods: []corev1.Pod{imagePull()}, want: Failure{ClassImage, true}},
		"an invalid image name":   {pods: []corev1.Pod{waiting("InvalidImageName")}, want: Failure{ClassImage, false}},
		"a missing Secret":        {pods: []corev1.Pod{waiting("CreateContainerConfigError")}, want: Failure{ClassInvalid, false}},
		"a quota":                 {refused: `pods "job-node-0-xxxxx" is forbidden: exceeded quota: q, requested: nvidia.com/gpu=1`, want: Failure{ClassRefused, true}},
		"Pod Security":            {refused: `pods "job-node-0-xxxxx" is forbidden: violates PodSecurity "restricted:latest": privileged`, want: Failure{ClassRefused, false}},
		"the refusal comes first": {pods: []corev1.Pod{imagePull()}, refused: "exceeded quota: q", want: Failure{ClassRefused, true}},
		"a missing Secret volume": {pods: []corev1.Pod{unschedulable("p")}, missing: `MountVolume.SetUp failed for volume "creds" : secret "creds" not found`,
			want: Failure{ClassInvalid, false}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, *stuckFailure(tc.pods, "job", tc.refused, tc.missing))
		})
	}
}

// A failed TrainJob's class: the Trainer's reason where it names the cause, else the failed
// pod's, else unknown; and the outputs say it.
func TestObserveClassifiesAFailure(t *testing.T) {
	failed := func(reason string) *trainer.TrainJob {
		return followJob(at(cond(trainer.TrainJobFailed, metav1.ConditionTrue, reason), t0))
	}
	oom := failedNode("job-node-1", t0, 137)
	oom.Status.ContainerStatuses[0].State.Terminated.Reason = "OOMKilled"
	cases := map[string]struct {
		tj    *trainer.TrainJob
		pods  []corev1.Pod
		class FailureClass
	}{
		"a failed node":                 {tj: failed("FailedJobs"), pods: []corev1.Pod{failedNode("job-node-1", t0, 1)}, class: ClassCode},
		"an OOM kill":                   {tj: failed("FailedJobs"), pods: []corev1.Pod{oom}, class: ClassOOM},
		"the Trainer's deadline":        {tj: failed("DeadlineExceeded"), pods: []corev1.Pod{oom}, class: ClassTimeout},
		"a runtime the Trainer refuses": {tj: failed("TrainingRuntimeNotSupported"), class: ClassInvalid},
		"no pod left to read":           {tj: failed("FailedJobs"), class: ClassUnknown},
		"no pod left, JobSet names an initializer's Job": {tj: func() *trainer.TrainJob {
			tj := failed("FailedJobs")
			tj.Status.Conditions[0].Message = "jobset failed due to one or more job failures (first failed job: job-model-initializer-0)"
			return tj
		}(), class: ClassInitializer},
		"no pod left, JobSet names a node's Job": {tj: func() *trainer.TrainJob {
			tj := failed("FailedJobs")
			tj.Status.Conditions[0].Message = "jobset failed due to one or more job failures (first failed job: job-node-0)"
			return tj
		}(), class: ClassUnknown},
		"another job's initializer": {tj: func() *trainer.TrainJob {
			tj := failed("FailedJobs")
			tj.Status.Conditions[0].Message = "jobset failed due to one or more job failures (first failed job: other-dataset-initializer-0)"
			return tj
		}(), class: ClassUnknown},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := Observe(tc.tj, tc.pods)
			require.NotNil(t, o.Failure)
			assert.Equal(t, tc.class, o.Failure.Class)
			assert.Equal(t, string(tc.class), o.Outputs()[OutFailureClass])
		})
	}
	ok := Observe(followJob(at(cond(trainer.TrainJobComplete, metav1.ConditionTrue, "AllJobsCompleted"), t0)), nil).Outputs()
	assert.Empty(t, ok[OutFailureClass], "a success has no failure class")
	assert.Empty(t, ok[OutRetryable])
}

// A failed pod's line says who took it away, where something did, before its exit code's words.
func TestDescribeFailureNamesTheDisruption(t *testing.T) {
	preempted := failedNode("job-node-0", t0, 137)
	preempted.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: corev1.PodReasonPreemptionByScheduler, Message: "default-scheduler: preempting to accommodate a higher priority pod"}}
	oomKilled := failedNode("job-node-0", t0, 137)
	oomKilled.Status.ContainerStatuses[0].State.Terminated.Reason = "OOMKilled"
	cases := map[string]struct {
		pod  corev1.Pod
		want string
	}{
		"preempted": {pod: preempted, want: "node 1 (pod job-node-0) failed (exit code 137), disrupted: PreemptionByScheduler " +
			"(default-scheduler: preempting to accommodate a higher priority pod)"},
		"OOMKilled": {pod: oomKilled, want: "node 1 (pod job-node-0) failed (exit code 137, OOMKilled)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, describeFailure(&tc.pod))
		})
	}
}

// A failed job's class is its first failure's, by when each pod failed, not by node index: the
// nodes that fail after a peer was OOM-killed or taken away fail because it was. An
// infrastructure failure within causeWindow of a code failure is taken as its cause, whichever
// record came first. The message and the log tail are the pod's the class came from.
func TestTheClassComesFromTheFirstFailure(t *testing.T) {
	exited := func(idx int, code int32, reason string, at time.Time) corev1.Pod {
		p := pod("job", NodeJob, idx, corev1.PodFailed)
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: NodeContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, Reason: reason, FinishedAt: metav1.NewTime(at)}}}}
		return p
	}
	code := func(idx int, at time.Time) corev1.Pod { return exited(idx, 1, "Error", at) }
	oom := func(idx int, at time.Time) corev1.Pod { return exited(idx, 137, "OOMKilled", at) }
	// taken is a pod something took away at at; its container ended later, after its grace
	// period (a last save on SIGTERM), past causeWindow.
	taken := func(idx int, reason string, at time.Time) corev1.Pod {
		p := exited(idx, 137, "Error", at.Add(90*time.Second))
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.NewTime(at)}}
		return p
	}
	oomBefore := oomRestarted(1, t0)
	oomBefore.Status.Phase = corev1.PodFailed
	oomBefore.Status.ContainerStatuses[0].LastTerminationState.Terminated.FinishedAt = metav1.NewTime(t0.Add(time.Minute))
	oomBefore.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 1, Reason: "Error", FinishedAt: metav1.NewTime(t0.Add(3 * time.Minute))}}
	cases := map[string]struct {
		pods    []corev1.Pod
		class   FailureClass
		blamed  string
		inWords string
	}{
		"node 1 OOM-killed, node 0 then exits 1 on its peer's loss: oom": {
			pods: []corev1.Pod{code(0, t0.Add(5*time.Second)), oom(1, t0)}, class: ClassOOM, blamed: "job-node-1",
			inWords: "node 1 (pod job-node-1) failed (exit code 137, OOMKilled)",
		},
		"both in the same second: the infrastructure failure": {
			pods: []corev1.Pod{code(0, t0), oom(1, t0)}, class: ClassOOM, blamed: "job-node-1",
		},
		"a code failure and, within causeWindow after it, an OOM kill: the OOM kill": {
			pods: []corev1.Pod{code(0, t0), oom(1, t0.Add(20*time.Second))}, class: ClassOOM, blamed: "job-node-1",
		},
		"a code failure, an OOM kill long after: code": {
			pods: []corev1.Pod{code(0, t0), oom(1, t0.Add(10*time.Minute))}, class: ClassCode, blamed: "job-node-0",
			inWords: "node 0 (pod job-node-0) failed (exit code 1)",
		},
		"node 1's code fails first, node 0 after it: node 1's": {
			pods: []corev1.Pod{code(0, t0.Add(3*time.Second)), code(1, t0)}, class: ClassCode, blamed: "job-node-1",
			inWords: "node 1 (pod job-node-1) failed (exit code 1)",
		},
		"preempted: from when it was taken, not when its container ended": {
			pods:  []corev1.Pod{code(0, t0.Add(10*time.Second)), taken(1, corev1.PodReasonPreemptionByScheduler, t0)},
			class: ClassPreempted, blamed: "job-node-1", inWords: "disrupted: PreemptionByScheduler",
		},
		"OOM-killed before its last restart, then exited 1; node 0 exited 1 in between: oom": {
			pods: []corev1.Pod{code(0, t0.Add(2*time.Minute)), oomBefore}, class: ClassOOM, blamed: "job-node-1",
		},
		"an OOM kill long before a code failure: oom": {
			pods: []corev1.Pod{code(0, t0.Add(time.Hour)), oom(1, t0)}, class: ClassOOM, blamed: "job-node-1",
		},
		"no time recorded: the first by index": {
			pods: []corev1.Pod{code(0, time.Time{}), oom(1, time.Time{})}, class: ClassCode, blamed: "job-node-0",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			failed := followJob(at(cond(trainer.TrainJobFailed, metav1.ConditionTrue, "FailedJobs"), t0.Add(time.Hour)))
			o := Observe(failed, tc.pods)
			require.NotNil(t, o.Failure)
			assert.Equal(t, Failure{Class: tc.class, Retryable: classRetryable[tc.class]}, *o.Failure)
			assert.Equal(t, tc.blamed, o.FailedPod, "the log tail is the blamed pod's")
			assert.Contains(t, o.Message, tc.inWords)
			v := Decide(Snapshot{TrainJob: failed, Pods: tc.pods, Now: t0.Add(time.Hour)}, Deadlines{})
			assert.Equal(t, tc.blamed, v.TailPod, "the face reads the blamed pod's log")
		})
	}
}
