package lifecycle

import (
	"fmt"
	"strconv"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/trainstep/trainstep/core/trainers"
	"github.com/trainstep/trainstep/core/trainjob"
)

// What the Trainer, JobSet, the kubelet, Kueue and people do to a TrainJob in the model: each is
// written as they write it (conditions, the pods' records), and remembered as ground truth.

// modelNodes is every model job's node count.
const modelNodes = 2

// Why a job's pods wait to start (evWait).
const (
	waitUnschedulable = "unschedulable"
	waitImage         = "image pull"
	waitBadImage      = "invalid image name"
)

// modelFailReason is the Failed condition's reason when the model's nodes fail: JobSet's.
const modelFailReason = "FailedJobs"

// retryableTruth says whether the model counts a class retryable, as docs/failures.md lists them.
func retryableTruth(c trainjob.FailureClass) bool {
	switch c {
	case trainjob.ClassOOM, trainjob.ClassPreempted, trainjob.ClassEvicted, trainjob.ClassNodeLost,
		trainjob.ClassImage, trainjob.ClassUnschedulable, trainjob.ClassHung:
		return true
	}
	return false
}

// modelPod is node i of job name, as JobSet makes it, with the given status.
func modelPod(name string, i int, status corev1.PodStatus) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-node-0-%d", name, i), Namespace: modelNamespace, Labels: map[string]string{
			trainjob.LabelJobSetName: name, trainjob.LabelReplicatedJob: trainjob.NodeJob, trainjob.LabelCompletionIndex: strconv.Itoa(i)}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: trainjob.NodeContainer}}},
		Status: status,
	}
}

// waitingPods are a job's nodes waiting to start, for why (one of the wait reasons, or "").
func waitingPods(name, why string) []corev1.Pod {
	status := corev1.PodStatus{Phase: corev1.PodPending}
	switch why {
	case waitUnschedulable:
		status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}}
	case waitImage, waitBadImage:
		reason := map[string]string{waitImage: "ErrImagePull", waitBadImage: "InvalidImageName"}[why]
		status.ContainerStatuses = []corev1.ContainerStatus{{Name: trainjob.NodeContainer,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "the model's registry"}}}}
	}
	pods := make([]corev1.Pod, modelNodes)
	for i := range pods {
		pods[i] = modelPod(name, i, status)
	}
	return pods
}

// runningPods are a job's nodes all running since started.
func runningPods(name string, started time.Time) []corev1.Pod {
	pods := make([]corev1.Pod, modelNodes)
	for i := range pods {
		pods[i] = modelPod(name, i, corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: trainjob.NodeContainer, Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}}}})
	}
	return pods
}

// failedStatus is a node's record of failing for class at: what the kubelet, the scheduler or
// the taint manager writes.
func failedStatus(class trainjob.FailureClass, started, at time.Time) corev1.PodStatus {
	ended := func(reason string, code int32) []corev1.ContainerStatus {
		return []corev1.ContainerStatus{{Name: trainjob.NodeContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			Reason: reason, ExitCode: code, StartedAt: metav1.NewTime(started), FinishedAt: metav1.NewTime(at)}}}}
	}
	disrupted := func(reason string) []corev1.PodCondition {
		return []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.NewTime(at)}}
	}
	s := corev1.PodStatus{Phase: corev1.PodFailed}
	switch class {
	case trainjob.ClassOOM:
		s.ContainerStatuses = ended("OOMKilled", 137)
	case trainjob.ClassPreempted:
		s.Conditions, s.ContainerStatuses = disrupted(corev1.PodReasonPreemptionByScheduler), ended("Error", 137)
	case trainjob.ClassEvicted:
		s.Reason, s.Conditions = "Evicted", disrupted(corev1.PodReasonTerminationByKubelet)
	case trainjob.ClassNodeLost:
		s.Conditions, s.ContainerStatuses = disrupted("DeletionByTaintManager"), ended("Error", 137)
	default:
		s.ContainerStatuses = ended("Error", 1)
	}
	return s
}

// liveJob is the pick-th TrainJob (oldest first) that exists and has not ended, "" when none.
func (w *world) liveJob(pick int) string {
	var live []string
	for _, name := range w.made {
		if w.jobs[name] != nil && w.truth[name].ended.IsZero() {
			live = append(live, name)
		}
	}
	if len(live) == 0 {
		return ""
	}
	return live[pick%len(live)]
}

// updateJob writes a change of the Trainer's or Kueue's to TrainJob name.
func (w *world) updateJob(name string, change func(tj *trainer.TrainJob)) {
	tj := w.jobs[name].DeepCopy()
	change(tj)
	if err := w.raw.Update(w.ctx, tj); err != nil {
		panic(fmt.Sprintf("the model's Trainer could not update TrainJob %s: %v", name, err))
	}
	w.mirror(tj)
}

func setCond(tj *trainer.TrainJob, kind string, status metav1.ConditionStatus, reason, msg string, at time.Time) {
	meta.SetStatusCondition(&tj.Status.Conditions, metav1.Condition{Type: kind, Status: status, Reason: reason,
		Message: msg, LastTransitionTime: metav1.NewTime(at)})
}

// wait makes a job's pods wait to start, for why; a running or held job is left alone.
func (w *world) wait(name, why string) bool {
	t := w.truth[name]
	if t.running || t.suspended {
		return false
	}
	w.pods[name], t.waiting = waitingPods(name, why), why
	return true
}

// run starts every node of a job; a resumed run's rank 0 posts the checkpoint it resumed from,
// which is no report of the function's.
func (w *world) run(name string) bool {
	t, now := w.truth[name], w.clock.Now()
	if t.running || t.suspended {
		return false
	}
	w.pods[name], t.running, t.waiting = runningPods(name, now), true, ""
	if t.started.IsZero() {
		t.started = now
	}
	if t.resumedRun {
		w.updateJob(name, func(tj *trainer.TrainJob) {
			tj.Status.TrainerStatus = &trainer.TrainerStatus{LastUpdatedTime: metav1.NewTime(now),
				Metrics: []trainer.Metric{{Name: trainers.ResumedFromMetric, Value: "step-40"}}}
		})
	}
	return true
}

// report is a post of the running function's to the Trainer's status server.
func (w *world) report(name string) bool {
	t, now := w.truth[name], w.clock.Now()
	if !t.running {
		return false
	}
	t.reported = now
	w.updateJob(name, func(tj *trainer.TrainJob) {
		tj.Status.TrainerStatus = &trainer.TrainerStatus{LastUpdatedTime: metav1.NewTime(now), ProgressPercentage: ptr.To[int32](40),
			Metrics: []trainer.Metric{{Name: trainers.ReportsMetric, Value: "1"}, {Name: "loss", Value: "0.5"}}}
	})
	return true
}

// fail fails node `node` for first gap ago, then (when second is set) the other node for second
// now, and JobSet the job: its class is the first failure's, whichever node's index is lower.
func (w *world) fail(name string, node int, first, second trainjob.FailureClass, gap time.Duration) bool {
	t, now := w.truth[name], w.clock.Now()
	if t.suspended {
		return false
	}
	started := t.started
	if started.IsZero() {
		started = t.created
	}
	pods := w.pods[name]
	pods[node%modelNodes].Status = failedStatus(first, started, now.Add(-gap))
	if second != "" {
		pods[(node+1)%modelNodes].Status = failedStatus(second, started, now)
	}
	w.pods[name] = pods
	t.running, t.ended, t.class = false, now, first
	w.updateJob(name, func(tj *trainer.TrainJob) {
		setCond(tj, trainer.TrainJobFailed, metav1.ConditionTrue, modelFailReason, fmt.Sprintf("jobset failed (first failed job: %s-node-0)", name), now)
	})
	return true
}

// complete ends a running job: every node succeeded.
func (w *world) complete(name string) bool {
	t, now := w.truth[name], w.clock.Now()
	if !t.running {
		return false
	}
	pods := w.pods[name]
	for i := range pods {
		pods[i].Status = corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: trainjob.NodeContainer,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: metav1.NewTime(t.started), FinishedAt: metav1.NewTime(now)}}}}}
	}
	t.running, t.ended, t.succeeded = false, now, true
	w.updateJob(name, func(tj *trainer.TrainJob) {
		setCond(tj, trainer.TrainJobComplete, metav1.ConditionTrue, "JobsCompleted", "jobset completed", now)
	})
	return true
}

// suspend is Kueue preempting a job (spec.suspend): its pods go.
func (w *world) suspend(name string) bool {
	t, now := w.truth[name], w.clock.Now()
	if t.suspended {
		return false
	}
	w.pods[name], t.suspended, t.running = nil, true, false
	w.updateJob(name, func(tj *trainer.TrainJob) {
		tj.Spec.Suspend = ptr.To(true)
		setCond(tj, trainer.TrainJobSuspended, metav1.ConditionTrue, trainer.TrainJobSuspendedReason, "TrainJob is suspended", now)
	})
	return true
}

// resume is Kueue admitting a suspended job again: new pods, waiting.
func (w *world) resume(name string) bool {
	t, now := w.truth[name], w.clock.Now()
	if !t.suspended {
		return false
	}
	w.pods[name], t.suspended, t.resumed, t.waiting = waitingPods(name, ""), false, now, ""
	w.updateJob(name, func(tj *trainer.TrainJob) {
		tj.Spec.Suspend = ptr.To(false)
		setCond(tj, trainer.TrainJobSuspended, metav1.ConditionFalse, trainer.TrainJobResumedReason, "TrainJob is resumed", now)
	})
	return true
}

// personDeletes is someone deleting a TrainJob (kubectl delete): a step whose face recorded it
// must not train it again.
func (w *world) personDeletes(name string) bool {
	tj := w.jobs[name]
	before := w.snapshot()
	if err := w.raw.Delete(w.ctx, tj); err != nil {
		panic(fmt.Sprintf("the model's person could not delete TrainJob %s: %v", name, err))
	}
	before.verb, before.name, before.before = verbDelete, name, tj
	w.gone(name)
	w.logWrite(before)
	for _, x := range w.steps {
		if x.active() && x.recorded == name {
			x.deletedUnder = name
		}
	}
	return true
}
