package trainjob

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// This file reads the Events of what a TrainJob owns. When something below the TrainJob cannot be
// made, no condition says so: JobSet cannot create a Job, a Job cannot create its pods (a
// ResourceQuota, Pod Security Admission, a LimitRange), a pod cannot mount its volumes (a
// missing Secret or ConfigMap). The TrainJob stays "starting: 0/N nodes running", and only a
// Warning Event on the JobSet, the Job or the pod says why. Every such Event is a Warning, so the
// faces watch Events with type=Warning (EventSelector) and keep of each only what is read here
// (TrimEvent).

// Reasons of the Warning Events read from what a TrainJob owns, in their owners' words.
const (
	// ReasonJobCreationFailed is JobSet's, on the JobSet: the apiserver refused one of its Jobs.
	ReasonJobCreationFailed = "JobCreationFailed"
	// ReasonPVCCreationFailed is JobSet's, on the JobSet: it cannot create a volume claim.
	ReasonPVCCreationFailed = "PVCCreationFailed"
	// ReasonFailedCreate is the Job controller's, on the Job: the apiserver refused a pod.
	ReasonFailedCreate = "FailedCreate"
	// ReasonFailedMount is the kubelet's, on the pod: a volume cannot be mounted.
	ReasonFailedMount = "FailedMount"
	// ReasonFailedAttachVolume is the attach/detach controller's, on the pod.
	ReasonFailedAttachVolume = "FailedAttachVolume"
)

// LabelJobName is the label the Job controller puts on a Job's pods.
const LabelJobName = "batch.kubernetes.io/job-name"

// Kinds of the objects a TrainJob owns, as Events name them.
const (
	kindJobSet = "JobSet"
	kindJob    = "Job"
	kindPod    = "Pod"
)

// eventSlack is how much earlier than the TrainJob's creation an Event about its objects may be
// stamped and still be taken for theirs: the components that write Events have their own clocks.
// An older one is about a job of the same name that was deleted (a rerun after a timeout).
const eventSlack = 2 * time.Second

// EventSelector is the server-side field selector of the Events a face follows: the Warnings.
// Every cause read here is one; the Normal Events (most of a cluster's) are never sent.
func EventSelector() fields.Selector {
	return fields.OneTermEqualSelector("type", corev1.EventTypeWarning)
}

// readsEvent reports whether Decide reads Events of this kind and reason.
func readsEvent(kind, reason string) bool {
	switch kind {
	case trainer.TrainJobKind:
		return reason == ReasonResourcesCreationFailed
	case kindJobSet:
		return reason == ReasonJobCreationFailed || reason == ReasonPVCCreationFailed
	case kindJob:
		return reason == ReasonFailedCreate
	case kindPod:
		return reason == ReasonFailedMount || reason == ReasonFailedAttachVolume
	}
	return false
}

// EventTrainJobs names the TrainJobs an Event may be about, for the faces' index and wake-ups:
// the object's name for a TrainJob or a JobSet (JobSet takes the TrainJob's name), and every
// dash-separated prefix of a Job's (<trainjob>-<replicated job>-<index>) or a pod's name, since
// where the TrainJob's name ends is not marked. Decide then matches exactly. None for an Event
// Decide does not read.
func EventTrainJobs(e *corev1.Event) []string {
	o := e.InvolvedObject
	if !readsEvent(o.Kind, e.Reason) || o.Name == "" {
		return nil
	}
	if o.Kind == trainer.TrainJobKind || o.Kind == kindJobSet {
		return []string{o.Name}
	}
	var names []string
	for i := 1; i < len(o.Name); i++ {
		if o.Name[i] == '-' {
			names = append(names, o.Name[:i])
		}
	}
	return names
}

// TrimEvent keeps of an Event what Decide reads: what it is about, its reason, type and times,
// and its message only when Decide reads its reason. Anything that is not a *corev1.Event passes
// through unchanged.
func TrimEvent(obj any) (any, error) {
	e, ok := obj.(*corev1.Event)
	if !ok {
		return obj, nil
	}
	out := &corev1.Event{
		TypeMeta: e.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              e.Name,
			Namespace:         e.Namespace,
			UID:               e.UID,
			ResourceVersion:   e.ResourceVersion,
			CreationTimestamp: e.CreationTimestamp,
		},
		InvolvedObject: corev1.ObjectReference{
			Kind: e.InvolvedObject.Kind, Namespace: e.InvolvedObject.Namespace,
			Name: e.InvolvedObject.Name, UID: e.InvolvedObject.UID,
		},
		Reason:         e.Reason,
		Type:           e.Type,
		Count:          e.Count,
		FirstTimestamp: e.FirstTimestamp,
		LastTimestamp:  e.LastTimestamp,
		EventTime:      e.EventTime,
	}
	if e.Series != nil {
		out.Series = &corev1.EventSeries{Count: e.Series.Count, LastObservedTime: e.Series.LastObservedTime}
	}
	if readsEvent(e.InvolvedObject.Kind, e.Reason) {
		out.Message = e.Message
	}
	return out, nil
}

// lastSeen is when an Event last happened: the old recorder's lastTimestamp, the new one's
// series or eventTime, else its creation.
func lastSeen(e *corev1.Event) time.Time {
	t := e.CreationTimestamp.Time
	for _, c := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time} {
		if c.After(t) {
			t = c
		}
	}
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	return t
}

var (
	// jobNamePart is what follows "<trainjob>-" in a Job's name: "<replicated job>-<index>".
	jobNamePart = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?-\d+$`)
	// jobSetFailedJob is JobSet v0.12's wording of a Job it could not create.
	jobSetFailedJob = regexp.MustCompile(`job "([^"]+)" creation failed`)
	// invalidJob is the apiserver's refusal of a Job's spec (StatusReasonInvalid).
	invalidJob = regexp.MustCompile(`Job\.batch "([^"]+)" is invalid`)
	// namedPod is a pod the Job controller tried to create: <its name but the random end>, then
	// the 5 random characters; podIndex the completion index an Indexed Job's pod adds.
	namedPod = regexp.MustCompile(`pods "([^"]+)-[a-z0-9]{5}"`)
	podIndex = regexp.MustCompile(`^-\d+$`)
)

// ownedTrouble is what the Events of a TrainJob's JobSet, Jobs and pods say is wrong.
type ownedTrouble struct {
	// Lines are one sentence per object and reason, in its owner's words: the JobSet, then
	// Jobs, then pods.
	Lines []string
	// InvalidJob is a Job the apiserver refuses as invalid and Invalid JobSet's message about it:
	// no retry can create it, so the step fails at once.
	InvalidJob, Invalid string
	// Refused is a Job's FailedCreate, when one stands: the apiserver refused its pods (a quota, Pod
	// Security, a LimitRange).
	Refused string
	// Missing is a pod's FailedMount that names a Secret or ConfigMap that is not there.
	Missing string
}

// missingSource matches the kubelet's FailedMount for a volume whose Secret or ConfigMap does
// not exist (pkg/volume/secret, pkg/volume/configmap: `secret "<name>" not found`).
var missingSource = regexp.MustCompile(`(secret|configmap|configmaps|secrets) "[^"]+" not found`)

// ownedEvent is the newest read Event of one reason about one object.
type ownedEvent struct {
	kind, name string
	event      *corev1.Event
}

// readOwnedEvents reads the Events about what the TrainJob owns. An Event counts only while
// nothing since has shown its cause gone: a Job's FailedCreate until the Job makes a pod after
// it, JobSet's JobCreationFailed while a Job it names has no pod, a pod's while the pod waits.
func readOwnedEvents(tj *trainer.TrainJob, pods []corev1.Pod, events []corev1.Event) ownedTrouble {
	byName := map[string]*corev1.Pod{}
	for i := range pods {
		if pods[i].Labels[LabelJobSetName] == tj.Name {
			byName[pods[i].Name] = &pods[i]
		}
	}
	var t ownedTrouble
	for _, oe := range newestOwned(tj, byName, events) {
		msg := oneLine(oe.event.Message)
		if oe.event.Reason == ReasonFailedCreate {
			msg = maskPodName(oe.name, msg)
			t.Refused = msg
		}
		if oe.event.Reason == ReasonFailedMount && missingSource.MatchString(msg) {
			t.Missing = msg
		}
		t.Lines = append(t.Lines, describeOwned(oe, byName)+": "+msg)
		if oe.event.Reason == ReasonJobCreationFailed && t.InvalidJob == "" {
			if job := refusedJob(tj.Name, msg, byName); job != "" {
				t.InvalidJob, t.Invalid = job, msg
			}
		}
	}
	if len(t.Lines) > maxTrouble {
		more := len(t.Lines) - maxTrouble
		t.Lines = append(t.Lines[:maxTrouble], fmt.Sprintf("and %d more", more))
	}
	return t
}

// newestOwned is the newest current Event of each reason about each object the TrainJob owns:
// the JobSet's first, then the Jobs', then the pods', each by name.
func newestOwned(tj *trainer.TrainJob, pods map[string]*corev1.Pod, events []corev1.Event) []ownedEvent {
	notBefore := tj.CreationTimestamp.Add(-eventSlack)
	newest := map[string]ownedEvent{}
	for i := range events {
		e := &events[i]
		o := e.InvolvedObject
		if e.Type != corev1.EventTypeWarning || o.Kind == trainer.TrainJobKind || !readsEvent(o.Kind, e.Reason) ||
			lastSeen(e).Before(notBefore) || !owned(tj.Name, o, pods) || stale(e, pods) {
			continue
		}
		key := o.Kind + "/" + o.Name + "/" + e.Reason
		if cur, ok := newest[key]; !ok || lastSeen(e).After(lastSeen(cur.event)) {
			newest[key] = ownedEvent{kind: o.Kind, name: o.Name, event: e}
		}
	}
	found := make([]ownedEvent, 0, len(newest))
	for _, oe := range newest {
		found = append(found, oe)
	}
	order := map[string]int{kindJobSet: 0, kindJob: 1, kindPod: 2}
	sort.Slice(found, func(i, j int) bool {
		if found[i].kind != found[j].kind {
			return order[found[i].kind] < order[found[j].kind]
		}
		if found[i].name != found[j].name {
			return found[i].name < found[j].name
		}
		return found[i].event.Reason < found[j].event.Reason
	})
	return found
}

// owned reports whether the object an Event is about belongs to the TrainJob named job: its
// JobSet (the same name), one of its Jobs (<job>-<replicated job>-<index>) or one of its pods.
func owned(job string, o corev1.ObjectReference, pods map[string]*corev1.Pod) bool {
	switch o.Kind {
	case kindJobSet:
		return o.Name == job
	case kindJob:
		rest, ok := strings.CutPrefix(o.Name, job+"-")
		return ok && jobNamePart.MatchString(rest)
	case kindPod:
		p, ok := pods[o.Name]
		return ok && (o.UID == "" || p.UID == "" || o.UID == p.UID)
	}
	return false
}

// stale reports whether what has happened since an Event shows its cause gone.
func stale(e *corev1.Event, pods map[string]*corev1.Pod) bool {
	o := e.InvolvedObject
	switch {
	case o.Kind == kindPod:
		// The kubelet's word about a pod counts while the pod waits to run.
		ph := pods[o.Name].Status.Phase
		return ph != corev1.PodPending && ph != ""
	case o.Kind == kindJob:
		// The Job made a pod after it could not: whatever refused it lets it now.
		for _, p := range pods {
			if jobOf(p) == o.Name && p.CreationTimestamp.After(lastSeen(e)) {
				return true
			}
		}
		return false
	case e.Reason == ReasonPVCCreationFailed:
		// JobSet creates its volume claims before its Jobs: pods mean the claims are there.
		return len(pods) > 0
	}
	// JobCreationFailed: every Job it names has pods by now (a transient refusal, or the cache
	// lagging behind a Job that was already there).
	names := jobSetFailedJob.FindAllStringSubmatch(e.Message, -1)
	if len(names) == 0 {
		return false
	}
	for _, n := range names {
		if !hasPods(n[1], pods) {
			return false
		}
	}
	return true
}

// refusedJob is a Job of the TrainJob named job that JobSet's message says the apiserver refuses
// as invalid, and that has no pod (so it was never created); "" when there is none.
func refusedJob(job, msg string, pods map[string]*corev1.Pod) string {
	for _, m := range invalidJob.FindAllStringSubmatch(msg, -1) {
		rest, ok := strings.CutPrefix(m[1], job+"-")
		if ok && jobNamePart.MatchString(rest) && !hasPods(m[1], pods) {
			return m[1]
		}
	}
	return ""
}

func hasPods(jobName string, pods map[string]*corev1.Pod) bool {
	for _, p := range pods {
		if jobOf(p) == jobName {
			return true
		}
	}
	return false
}

// jobOf is the Job a pod belongs to: its job-name label, else its owner.
func jobOf(p *corev1.Pod) string {
	if n := p.Labels[LabelJobName]; n != "" {
		return n
	}
	for _, r := range p.OwnerReferences {
		if r.Kind == kindJob {
			return r.Name
		}
	}
	return ""
}

// describeOwned says what cannot be done, and by which object.
func describeOwned(oe ownedEvent, pods map[string]*corev1.Pod) string {
	switch oe.event.Reason {
	case ReasonJobCreationFailed:
		return fmt.Sprintf("JobSet %s cannot create its Jobs", oe.name)
	case ReasonPVCCreationFailed:
		return fmt.Sprintf("JobSet %s cannot create its volume claims", oe.name)
	case ReasonFailedCreate:
		return fmt.Sprintf("Job %s cannot create pods", oe.name)
	case ReasonFailedAttachVolume:
		return describePod(pods[oe.name]) + " cannot attach its volumes"
	}
	return describePod(pods[oe.name]) + " cannot mount its volumes"
}

// maskPodName replaces the random end of the pod a Job tried to create (<job>-<index>-<5
// random characters>) with xxxxx: each retry names another pod, and the step's message would
// change, and be sent again, at every retry for no news.
func maskPodName(job, msg string) string {
	return namedPod.ReplaceAllStringFunc(msg, func(m string) string {
		name := namedPod.FindStringSubmatch(m)[1]
		rest, ok := strings.CutPrefix(name, job)
		if !ok || (rest != "" && !podIndex.MatchString(rest)) {
			return m
		}
		return `pods "` + name + `-xxxxx"`
	})
}

// oneLine joins a multi-line message (JobSet joins one error per Job) into one line.
func oneLine(s string) string {
	var parts []string
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}

// withOwnedTrouble adds what the Events of the TrainJob's objects say to a verdict on a job that
// is not running, and fails it at once when a Job can never be created. It reports whether the
// verdict is final.
func withOwnedTrouble(v *Verdict, s Snapshot) bool {
	t := readOwnedEvents(s.TrainJob, s.Pods, s.Events)
	v.refused, v.missing = t.Refused, t.Missing
	if t.InvalidJob != "" {
		now := s.Now
		v.Phase, v.Reason = PhaseFailed, ReasonJobCreationFailed
		v.Message = fmt.Sprintf("TrainJob %s cannot start: the apiserver refuses its Job %s as invalid, which no retry can change; it was deleted. JobSet %s: %s",
			s.TrainJob.Name, t.InvalidJob, s.TrainJob.Name, t.Invalid)
		v.CompletionTime = &now
		v.Delete = true
		return true
	}
	if len(t.Lines) > 0 {
		v.addNote(strings.Join(t.Lines, "; "))
		v.Trouble = true
	}
	if v.Reason == ReasonResourcesCreationFailed {
		v.Trouble = true // the Trainer's own Event, in the message by WithEvents
	}
	return false
}
