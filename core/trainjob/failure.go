package trainjob

import (
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FailureClass says why a step failed, in a small documented set a pipeline can act on
// (docs/failures.md): a bug in the training code is not worth retrying, a preempted node is.
// Every class comes from what Kubernetes, JobSet, the Trainer or Kueue recorded (a pod's
// condition, status reason, container state; an Event; a Workload's eviction), never from the
// log's text.
type FailureClass string

// The failure classes.
const (
	// ClassCode: the training code failed (a non-zero exit, a lost return value).
	ClassCode FailureClass = "code"
	// ClassOOM: a container was killed for memory (OOMKilled).
	ClassOOM FailureClass = "oom"
	// ClassPreempted: the scheduler or the kubelet preempted a pod for another.
	ClassPreempted FailureClass = "preempted"
	// ClassEvicted: a pod was evicted (node pressure, the Eviction API, a node that refused it
	// at admission) or Kueue evicted the job's Workload.
	ClassEvicted FailureClass = "evicted"
	// ClassNodeLost: a pod's node went away (shut down, unreachable, deleted).
	ClassNodeLost FailureClass = "node-lost"
	// ClassImage: an image cannot be pulled.
	ClassImage FailureClass = "image"
	// ClassUnschedulable: the job did not start within its startTimeout: no room for its pods.
	ClassUnschedulable FailureClass = "unschedulable"
	// ClassRefused: the cluster refused what the step needs: a quota, Pod Security, a
	// LimitRange (a Job's FailedCreate), or trainstep's own permissions.
	ClassRefused FailureClass = "refused"
	// ClassInvalid: the step or a Job it makes is invalid (the apiserver refuses it; a missing
	// Secret or ConfigMap).
	ClassInvalid FailureClass = "invalid"
	// ClassInitializer: a dataset or model initializer failed.
	ClassInitializer FailureClass = "initializer"
	// ClassTimeout: the step's timeout (or the TrainJob's active deadline) passed.
	ClassTimeout FailureClass = "timeout"
	// ClassHung: the job's progress stopped moving for the step's hangTimeout.
	ClassHung FailureClass = "hung"
	// ClassCancelled: someone stopped the step, deleted its TrainJob or deactivated its Workload.
	ClassCancelled FailureClass = "cancelled"
	// ClassUnknown: nothing recorded says why.
	ClassUnknown FailureClass = "unknown"
)

// Failure is a failed step's class and whether retrying it can help.
type Failure struct {
	Class     FailureClass
	Retryable bool
}

// classRetryable is whether retrying helps, class by class, where the instance does not say
// otherwise (an image that does not exist, a quota against a Pod Security refusal).
var classRetryable = map[FailureClass]bool{
	ClassOOM: true, ClassPreempted: true, ClassEvicted: true, ClassNodeLost: true, ClassImage: true,
	ClassUnschedulable: true, ClassInitializer: true, ClassHung: true,
}

// Classified is a failure of class c, retryable as the class is.
func Classified(c FailureClass) *Failure {
	return &Failure{Class: c, Retryable: classRetryable[c]}
}

// ReasonFailure is the class of a failure a reason names alone: the ones trainstep and the
// Trainer decide without a pod to read. Nil for a reason that needs evidence.
func ReasonFailure(reason string) *Failure {
	switch reason {
	case ReasonTimeout, reasonTrainerDeadline, kueueMaxExecutionTime:
		return Classified(ClassTimeout)
	case ReasonJobCreationFailed, reasonRuntimeNotSupported:
		return Classified(ClassInvalid)
	case ReasonStartTimeout:
		return Classified(ClassUnschedulable)
	case kueueDeactivated:
		return Classified(ClassCancelled)
	}
	if strings.HasPrefix(reason, kueueDeactivated+"DueTo") {
		return Classified(ClassEvicted) // evicted until Kueue gave up: requeuing limit, manager eviction
	}
	return nil
}

// Reasons the Trainer and Kueue record that name their cause.
const (
	// reasonTrainerDeadline is the Trainer's Failed reason past spec.activeDeadlineSeconds.
	reasonTrainerDeadline = "DeadlineExceeded"
	// reasonRuntimeNotSupported is the Trainer's Failed reason for a runtime it cannot run.
	reasonRuntimeNotSupported = "TrainingRuntimeNotSupported"
	// kueueMaxExecutionTime is Kueue's deactivation past the Workload's maximum execution time.
	kueueMaxExecutionTime = kueueDeactivated + "DueToMaximumExecutionTimeExceeded"
)

// JobSet's Failed reasons, which the Trainer copies onto the TrainJob's Failed condition with
// their message (JobSet v0.8 to v0.12): "<what happened> (first failed job: <its name>)", a Job
// named <jobset>-<replicated job>-<index>, the JobSet named as the TrainJob.
const (
	reasonJobSetFailedJobs  = "FailedJobs"
	reasonJobSetMaxRestarts = "ReachedMaxRestarts"
	reasonJobSetFailAction  = "FailJobSetFailurePolicyAction"
	firstFailedJob          = "(first failed job: "
)

// jobSetFailure is the class a JobSet's Failed condition shows alone, with no pod to read (on a
// MultiKueue manager, whose pods are on the worker; a job whose pods are gone): an initializer's
// Job failed first. Nil when the Job is the trainer's: neither JobSet nor the Trainer copies
// how its pods failed (the Job's own reason, BackoffLimitExceeded or PodFailurePolicy, and the
// pods' exit codes and conditions stay on the Job and its pods).
func jobSetFailure(jobName string, c *metav1.Condition) *Failure {
	switch c.Reason {
	case reasonJobSetFailedJobs, reasonJobSetMaxRestarts, reasonJobSetFailAction:
		_, job, ok := strings.Cut(c.Message, firstFailedJob)
		if !ok {
			return nil
		}
		job, _, _ = strings.Cut(job, ")")
		rj, ok := strings.CutPrefix(job, jobName+"-")
		if i := strings.LastIndexByte(rj, '-'); i > 0 {
			rj = rj[:i] // the Job's index
		}
		if ok && (rj == DatasetInitializerJob || rj == ModelInitializerJob) {
			return Classified(ClassInitializer)
		}
	}
	return nil
}

// podFailure classifies a failed pod by what Kubernetes recorded on it: its DisruptionTarget
// condition, its status reason, its containers' terminations. An initializer's failure is the
// initializer's, whatever killed it.
func podFailure(p *corev1.Pod) *Failure {
	if isInitializer(p) {
		return Classified(ClassInitializer)
	}
	if c := disruption(p); c != "" {
		return Classified(c)
	}
	switch r := p.Status.Reason; {
	case r == reasonEvicted:
		return Classified(ClassEvicted)
	case r == "Preempting":
		return Classified(ClassPreempted)
	case r == "Terminated", r == "NodeShutdown", r == "NodeLost":
		return Classified(ClassNodeLost)
	case r == "UnexpectedAdmissionError", strings.HasPrefix(r, "OutOf"):
		return Classified(ClassEvicted) // the node refused the pod at admission: another may take it
	case r == "DeadlineExceeded":
		return Classified(ClassTimeout)
	}
	statuses := containerStatuses(p)
	for _, cs := range statuses {
		for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
			if t != nil && t.Reason == "OOMKilled" {
				return Classified(ClassOOM)
			}
		}
	}
	for _, cs := range statuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return Classified(ClassCode)
		}
	}
	return nil
}

// infrastructure are the classes of a failure the cluster caused, not the code: a node whose peer
// failed so fails too, its collective or rendezvous broken, in the code's words (exit 1).
var infrastructure = map[FailureClass]bool{ClassOOM: true, ClassPreempted: true, ClassEvicted: true, ClassNodeLost: true}

// causeWindow is how close to a code failure (a non-zero exit, or a pod that records nothing)
// an infrastructure failure must be to be taken as its cause, even when its record is the later
// one: the times are whole seconds from different nodes' clocks, and a node whose peer was
// OOM-killed, preempted or evicted loses it as the peer's sockets close, within seconds. A
// minute holds that with room; a code failure further from it is the code's own (one that
// waits out a collective timeout, NCCL's 10 minutes, is still the infrastructure's when its
// record is the earlier, by firstFailure's order). No infrastructure failure follows a code
// failure because of it: JobSet deletes the other pods of a failed job, which records no cause.
const causeWindow = time.Minute

// firstFailure is the failed pod whose failure explains the job's, among failed (in index
// order): the earliest (failedAt; a pod with no time after those with one, in index order),
// unless that is a code failure and an infrastructure failure came within causeWindow of it.
// Nil when failed is empty.
func firstFailure(failed []*corev1.Pod) *corev1.Pod {
	if len(failed) == 0 {
		return nil
	}
	type failure struct {
		pod   *corev1.Pod
		class *Failure
		at    time.Time
	}
	fs := make([]failure, len(failed))
	for i, p := range failed {
		fs[i] = failure{pod: p, class: podFailure(p), at: failedAt(p)}
	}
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i].at, fs[j].at
		return !a.IsZero() && (b.IsZero() || a.Before(b))
	})
	first := fs[0]
	if first.at.IsZero() || (first.class != nil && first.class.Class != ClassCode) {
		return first.pod
	}
	for _, f := range fs[1:] {
		if f.class != nil && infrastructure[f.class.Class] && !f.at.IsZero() && f.at.Sub(first.at) <= causeWindow {
			return f.pod
		}
	}
	return first.pod
}

// failedAt is when a failed pod failed, as recorded: when something took it away (its
// DisruptionTarget condition; its containers end a grace period later), else when its first
// container ended with an error or OOMKilled (now or before its last restart). Zero when none
// says.
func failedAt(p *corev1.Pod) time.Time {
	if c := disruptionCondition(p); c != nil && !c.LastTransitionTime.IsZero() {
		return c.LastTransitionTime.Time
	}
	var at time.Time
	for _, cs := range containerStatuses(p) {
		for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
			if t == nil || (t.ExitCode == 0 && t.Reason != "OOMKilled") || t.FinishedAt.IsZero() {
				continue
			}
			if at.IsZero() || t.FinishedAt.Time.Before(at) {
				at = t.FinishedAt.Time
			}
		}
	}
	return at
}

// disruption is the class a pod's DisruptionTarget condition names, or "": who took the pod away.
func disruption(p *corev1.Pod) FailureClass {
	if c := disruptionCondition(p); c != nil {
		switch c.Reason {
		case corev1.PodReasonPreemptionByScheduler:
			return ClassPreempted
		case "EvictionByEvictionAPI":
			return ClassEvicted
		case "DeletionByTaintManager", "DeletionByPodGC":
			return ClassNodeLost
		case corev1.PodReasonTerminationByKubelet:
			switch p.Status.Reason {
			case "Terminated":
				return ClassNodeLost // graceful node shutdown
			case "Preempting":
				return ClassPreempted // for a critical pod
			}
			return ClassEvicted // node pressure
		}
		return ClassEvicted
	}
	return ""
}

// disruptionCondition is the pod's DisruptionTarget condition when it is true, else nil.
func disruptionCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if c := &p.Status.Conditions[i]; c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// stuckFailure classifies a job that did not start within its startTimeout by why its pods
// wait: an image, a refused pod (FailedCreate: refused), a missing Secret or ConfigMap (a
// volume's FailedMount: missing, or an env's CreateContainerConfigError); else no room.
func stuckFailure(pods []corev1.Pod, jobName, refused, missing string) *Failure {
	if refused != "" {
		// A quota frees up as other work ends; Pod Security and a LimitRange do not change.
		return &Failure{Class: ClassRefused, Retryable: strings.Contains(refused, "exceeded quota")}
	}
	if missing != "" {
		return Classified(ClassInvalid) // as a missing Secret an env names: the step names what is not there
	}
	for i := range pods {
		p := &pods[i]
		if p.Labels[LabelJobSetName] != jobName || p.Status.Phase != corev1.PodPending {
			continue
		}
		for _, cs := range containerStatuses(p) {
			w := cs.State.Waiting
			if w == nil {
				continue
			}
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "RegistryUnavailable":
				return Classified(ClassImage)
			case "InvalidImageName", "ErrImageNeverPull", "SignatureValidationFailed":
				return &Failure{Class: ClassImage} // no retry pulls it
			case "CreateContainerConfigError":
				return Classified(ClassInvalid) // a Secret, ConfigMap or key the pod names is missing
			}
		}
	}
	return Classified(ClassUnschedulable)
}
