package trainjob

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// stuckReasons are the container waiting reasons that mean a pod will not start by itself soon:
// the kubelet's own words, as the pod states them.
var stuckReasons = map[string]bool{
	"ImagePullBackOff":           true,
	"ErrImagePull":               true,
	"InvalidImageName":           true,
	"CrashLoopBackOff":           true,
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
	"RunContainerError":          true,
}

// maxTrouble bounds how many pods a message names; the rest are counted.
const maxTrouble = 3

// Trouble is why a TrainJob that is not yet running is not: a pod the scheduler cannot place, a
// container the kubelet cannot start, or a node that failed and that its Job is retrying. The
// Trainer's conditions say none of this; the pods do.
type Trouble struct {
	// Lines are one sentence per pod, most telling first: failures, then stuck pods.
	Lines []string
	// Retrying is the newest failed pod of a node its Job is retrying: its log says why.
	Retrying string
}

// podTrouble reads a TrainJob's pods (every replicated job: initializers too).
func podTrouble(pods []corev1.Pod, jobName string) Trouble {
	var failed, stuck []string
	var t Trouble
	var newestFailed *corev1.Pod
	attempts := map[string]int{} // failed pods per replicated job and index
	sorted := append([]corev1.Pod(nil), pods...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].CreationTimestamp.Before(&sorted[j].CreationTimestamp) })
	for i := range sorted {
		p := &sorted[i]
		if p.Labels[LabelJobSetName] != jobName {
			continue
		}
		slot := p.Labels[LabelReplicatedJob] + "-" + p.Labels[LabelCompletionIndex]
		switch p.Status.Phase {
		case corev1.PodFailed:
			attempts[slot]++
			failed = append(failed, fmt.Sprintf("%s failed (%s), attempt %d; the Job is retrying it", describePod(p), exitOf(p), attempts[slot]))
			newestFailed = p
		case corev1.PodPending, corev1.PodRunning, "":
			if why := stuckWhy(p); why != "" {
				stuck = append(stuck, fmt.Sprintf("%s %s", describePod(p), why))
			}
		}
	}
	if newestFailed != nil {
		t.Retrying = newestFailed.Name
		// The newest failure per slot tells the story; older ones only count.
		failed = failed[len(failed)-1:]
	}
	t.Lines = append(append(t.Lines, failed...), stuck...)
	if len(t.Lines) > maxTrouble {
		more := len(t.Lines) - maxTrouble
		t.Lines = append(t.Lines[:maxTrouble], fmt.Sprintf("and %d more pod(s)", more))
	}
	return t
}

// describePod names a pod by its role: "node 1 (pod x)".
func describePod(p *corev1.Pod) string {
	role := p.Labels[LabelReplicatedJob]
	if idx := p.Labels[LabelCompletionIndex]; idx != "" {
		role += " " + idx
	}
	if role == "" {
		return "pod " + p.Name
	}
	return fmt.Sprintf("%s (pod %s)", role, p.Name)
}

// stuckWhy is the scheduler's or the kubelet's reason a pod is not running, or "".
func stuckWhy(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return "cannot be scheduled: " + strings.TrimSpace(c.Message)
		}
	}
	for _, cs := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && stuckReasons[w.Reason] {
			msg := fmt.Sprintf("container %s: %s", cs.Name, w.Reason)
			if w.Message != "" {
				msg += ": " + strings.TrimSpace(w.Message)
			}
			return msg
		}
	}
	return ""
}

// exitOf is how a failed pod ended: its first terminated container's exit code and reason.
func exitOf(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			s := "exit code " + strconv.Itoa(int(t.ExitCode))
			if t.Reason != "" && t.Reason != "Error" {
				s += ", " + t.Reason
			}
			return s
		}
	}
	if p.Status.Reason != "" {
		return p.Status.Reason
	}
	return "no exit code recorded"
}
