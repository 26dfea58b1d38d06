package trainjob

import (
	"fmt"
	"slices"
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

// Trouble is why a TrainJob is not (or not wholly) running: a pod the scheduler cannot place, a
// container the kubelet cannot start, a node that failed or was evicted and that its Job is
// replacing, a node restarted in place or by JobSet. The Trainer's conditions say none of this;
// the pods do.
type Trouble struct {
	// Lines are one sentence per pod, most telling first: failures and restarts, then stuck pods.
	Lines []string
	// Retrying is the newest failed pod of a node (or initializer) its Job is retrying, and
	// RetryingContainer its container whose log says why.
	Retrying, RetryingContainer string
	// Restarted says a line reports a failure or restart: news even while every node runs.
	Restarted bool
}

// podTrouble reads a TrainJob's pods (every replicated job: initializers too), slot by slot (a
// replicated job and completion index: a failed pod and the replacement its Job made share one).
func podTrouble(pods []corev1.Pod, jobName string) Trouble {
	var t Trouble
	var failed, stuck []string
	var newestFailed *corev1.Pod
	slots, restartAttempt := slotsOf(pods, jobName)
	if restartAttempt > 0 {
		// JobSet recreated every Job (its failurePolicy): its pods say which attempt they are.
		failed = append(failed, fmt.Sprintf("JobSet restarted the TrainJob's jobs: attempt %d", restartAttempt+1))
		t.Restarted = true
	}
	for _, slot := range slots {
		var fails []*corev1.Pod
		var current *corev1.Pod // the slot's newest pod that has not failed
		for _, p := range slot {
			if p.Status.Phase == corev1.PodFailed {
				fails = append(fails, p)
				newestFailed = p
			} else {
				current = p
			}
		}
		if len(fails) > 0 {
			failed = append(failed, failedLine(fails[len(fails)-1], len(fails), current))
			t.Restarted = true
		}
		if current == nil {
			continue
		}
		if line := restartedLine(current, len(fails)); line != "" {
			failed = append(failed, line)
			t.Restarted = true
		}
		if why := stuckWhy(current); why != "" && len(fails) == 0 {
			stuck = append(stuck, fmt.Sprintf("%s %s", describePod(current), why))
		}
	}
	if newestFailed != nil {
		t.Retrying, t.RetryingContainer = newestFailed.Name, logContainer(newestFailed)
	}
	t.Lines = append(append(t.Lines, failed...), stuck...)
	if len(t.Lines) > maxTrouble {
		more := len(t.Lines) - maxTrouble
		t.Lines = append(t.Lines[:maxTrouble], fmt.Sprintf("and %d more pod(s)", more))
	}
	return t
}

// slotsOf groups a TrainJob's pods by slot, oldest first within one and slots in the order their
// first pod was made, and reads the highest JobSet restart attempt among them.
func slotsOf(pods []corev1.Pod, jobName string) (slots [][]*corev1.Pod, restartAttempt int) {
	sorted := append([]corev1.Pod(nil), pods...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].CreationTimestamp.Before(&sorted[j].CreationTimestamp) })
	index := map[string]int{}
	for i := range sorted {
		p := &sorted[i]
		if p.Labels[LabelJobSetName] != jobName {
			continue
		}
		key := p.Labels[LabelReplicatedJob] + "-" + p.Labels[LabelCompletionIndex]
		at, ok := index[key]
		if !ok {
			at = len(slots)
			index[key] = at
			slots = append(slots, nil)
		}
		slots[at] = append(slots[at], p)
		if n, err := strconv.Atoi(p.Labels[LabelJobSetRestartAttempt]); err == nil && n > restartAttempt {
			restartAttempt = n
		}
	}
	return slots, restartAttempt
}

// LabelJobSetRestartAttempt is the label JobSet puts on its Jobs' pods: how many times it has
// recreated all its Jobs (its failurePolicy's restarts).
const LabelJobSetRestartAttempt = "jobset.sigs.k8s.io/restart-attempt"

// failedLine tells how a slot's newest failed pod ended (its attempt), and where its replacement
// is: "node 0 (pod x) was evicted, attempt 1: <kubelet's words>; the Job is retrying it: its
// replacement (pod y) is pending: cannot be scheduled: ...".
func failedLine(p *corev1.Pod, attempt int, replacement *corev1.Pod) string {
	line := fmt.Sprintf("%s failed (%s), attempt %d", describePod(p), exitOf(p), attempt)
	if p.Status.Reason == reasonEvicted {
		line = fmt.Sprintf("%s was evicted, attempt %d", describePod(p), attempt)
		if msg := strings.TrimSpace(p.Status.Message); msg != "" {
			line += ": " + msg
		}
	}
	switch {
	case replacement == nil:
		return line + "; the Job is retrying it"
	case replacement.Status.Phase == corev1.PodRunning:
		return line + fmt.Sprintf("; its replacement (pod %s) is running", replacement.Name)
	case replacement.Status.Phase == corev1.PodSucceeded:
		return line + fmt.Sprintf("; its replacement (pod %s) succeeded", replacement.Name)
	}
	line += fmt.Sprintf("; the Job is retrying it: its replacement (pod %s) is pending", replacement.Name)
	if why := stuckWhy(replacement); why != "" {
		line += ": " + why
	}
	return line
}

// reasonEvicted is the pod status reason the kubelet gives a pod it evicted (node pressure).
const reasonEvicted = "Evicted"

// restartedLine reports a pod whose containers the kubelet restarted in place (restartPolicy
// OnFailure, JobSet's default): how the last run ended, and which attempt this is.
func restartedLine(p *corev1.Pod, failedBefore int) string {
	for _, cs := range p.Status.ContainerStatuses {
		last := cs.LastTerminationState.Terminated
		if cs.RestartCount == 0 || last == nil {
			continue
		}
		how := "exit code " + strconv.Itoa(int(last.ExitCode))
		if last.Reason != "" && last.Reason != "Error" {
			how = fmt.Sprintf("%s (exit code %d)", last.Reason, last.ExitCode)
		}
		who := describePod(p)
		if cs.Name != NodeContainer {
			who += " container " + cs.Name
		}
		return fmt.Sprintf("%s restarted: %s, attempt %d", who, how, failedBefore+int(cs.RestartCount)+1)
	}
	return ""
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
	for _, cs := range containerStatuses(p) {
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

// containerStatuses are a pod's init containers' statuses, then its containers', in one new
// slice: where a pod says why it waits or how it ended, either may.
func containerStatuses(p *corev1.Pod) []corev1.ContainerStatus {
	return slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses)
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

// maxFailureWords bounds the termination message a failure line quotes (a container may write
// up to 4 KiB there); the log tail follows it in full.
const maxFailureWords = 256

// describeFailure says how a failed pod ended, in its own words: "dataset-initializer 0 (pod x)
// failed (exit code 1): <its termination message>", or "was evicted: <the kubelet's words>".
// The Trainer's failure condition names no pod (JobSet fails "due to one or more job failures"),
// so this is what tells an initializer that failed from a node that did.
func describeFailure(p *corev1.Pod) string {
	if p.Status.Reason == reasonEvicted {
		line := describePod(p) + " was evicted"
		if msg := strings.TrimSpace(p.Status.Message); msg != "" {
			line += ": " + msg
		}
		return line
	}
	line := fmt.Sprintf("%s failed (%s)", describePod(p), exitOf(p))
	if c := disruptionCondition(p); c != nil {
		// Who took the pod away says more than its exit (137: killed): the scheduler's
		// preemption, the taint manager's delete of a lost node's pods, an eviction.
		line += ", disrupted: " + c.Reason
		if msg := oneLine(c.Message); msg != "" {
			line += " (" + msg + ")"
		}
		return line
	}
	for _, cs := range containerStatuses(p) {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			if words := oneLine(t.Message); words != "" {
				if len(words) > maxFailureWords {
					words = words[:maxFailureWords] + "…"
				}
				line += ": " + words
			}
			break
		}
	}
	return line
}
