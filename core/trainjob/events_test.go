package trainjob

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Real messages, as JobSet v0.12, the Job controller and the kubelet write them.
const (
	invalidJobMsg = `job "job-node-0" creation failed with error: Job.batch "job-node-0" is invalid: ` +
		`[spec.template.spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "500m": must be an integer]`
	existsMsg = `job "job-node-0" creation failed with error: jobs.batch "job-node-0" already exists`
	quotaMsg  = `Error creating: pods "job-node-0-1-abcde" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1`
	psaMsg    = `Error creating: pods "job-node-0-0-abcde" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false`
	mountMsg  = `MountVolume.SetUp failed for volume "credentials" : secret "s3" not found`
)

// warning is a Warning Event about kind/name, last seen at t (the old recorder's lastTimestamp).
func warning(kind, name, reason, msg string, t time.Time) corev1.Event {
	return corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name + "." + reason, CreationTimestamp: metav1.NewTime(t)},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Name: name},
		Reason:         reason, Message: msg, Type: corev1.EventTypeWarning, LastTimestamp: metav1.NewTime(t),
	}
}

// seriesEvent is the new recorder's (JobSet's, the Trainer's): eventTime and a series, no lastTimestamp.
func seriesEvent(kind, name, reason, msg string, first, last time.Time) corev1.Event {
	e := warning(kind, name, reason, msg, first)
	e.LastTimestamp = metav1.Time{}
	e.EventTime = metav1.NewMicroTime(first)
	e.Series = &corev1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(last)}
	return e
}

// jobPod is a pod of Job job-node-0, created at t.
func jobPod(idx int, phase corev1.PodPhase, t time.Time) corev1.Pod {
	p := pod("job", NodeJob, idx, phase)
	p.Name = "job-node-0-" + string(rune('0'+idx)) + "-abcde"
	p.UID = types.UID("uid-" + p.Name)
	p.Labels[LabelJobName] = "job-node-0"
	p.CreationTimestamp = metav1.NewTime(t)
	return p
}

func TestDecideReadsTheEventsOfWhatTheTrainJobOwns(t *testing.T) {
	minute := t0.Add(time.Minute)
	cases := map[string]struct {
		pods      []corev1.Pod
		events    []corev1.Event
		d         Deadlines
		phase     Phase
		reason    string
		delete    bool
		trouble   bool
		inMessage []string
		notIn     []string
	}{
		"an invalid Job: failed at once in JobSet's words, and deleted": {
			events: []corev1.Event{seriesEvent(kindJobSet, "job", ReasonJobCreationFailed, invalidJobMsg, t0.Add(time.Second), t0.Add(2*time.Second))},
			phase:  PhaseFailed, reason: ReasonJobCreationFailed, delete: true,
			inMessage: []string{"the apiserver refuses its Job job-node-0 as invalid", `Invalid value: "500m": must be an integer`, "it was deleted"},
		},
		"an invalid Job that has pods by now was created after all: no verdict from it": {
			pods:   []corev1.Pod{jobPod(0, corev1.PodPending, t0.Add(5*time.Second))},
			events: []corev1.Event{warning(kindJobSet, "job", ReasonJobCreationFailed, invalidJobMsg, t0.Add(time.Second))},
			phase:  PhasePending, notIn: []string{"cannot create its Jobs"},
		},
		"a Job refused for another reason: reported, the step waits": {
			events: []corev1.Event{warning(kindJobSet, "job", ReasonJobCreationFailed, `job "job-node-0" creation failed with error: admission webhook "x" denied the request`, t0.Add(time.Second))},
			phase:  PhasePending, trouble: true,
			inMessage: []string{`JobSet job cannot create its Jobs: job "job-node-0" creation failed with error: admission webhook "x" denied the request`},
		},
		"a transient refusal of a Job that now has pods is old news": {
			pods:   []corev1.Pod{jobPod(0, corev1.PodPending, t0.Add(5*time.Second))},
			events: []corev1.Event{warning(kindJobSet, "job", ReasonJobCreationFailed, existsMsg, t0.Add(time.Second))},
			phase:  PhasePending, notIn: []string{"already exists"},
		},
		"a ResourceQuota: the Job's FailedCreate names it": {
			pods:   []corev1.Pod{jobPod(0, corev1.PodRunning, t0.Add(time.Second))},
			events: []corev1.Event{warning(kindJob, "job-node-0", ReasonFailedCreate, quotaMsg, t0.Add(time.Second))},
			phase:  PhasePending, trouble: true,
			inMessage: []string{"TrainJob job is starting: 1/2 nodes running; Job job-node-0 cannot create pods: " +
				`Error creating: pods "job-node-0-1-xxxxx" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1`},
		},
		"Pod Security Admission: the Job's FailedCreate, newest first": {
			events: []corev1.Event{
				warning(kindJob, "job-node-0", ReasonFailedCreate, "Error creating: older", t0.Add(time.Second)),
				warning(kindJob, "job-node-0", ReasonFailedCreate, psaMsg, t0.Add(3*time.Second)),
			},
			phase: PhasePending, trouble: true, inMessage: []string{`violates PodSecurity "restricted:latest"`}, notIn: []string{"older"},
		},
		"a Job that made a pod since its FailedCreate is past it": {
			pods:   []corev1.Pod{jobPod(0, corev1.PodPending, t0.Add(10*time.Second))},
			events: []corev1.Event{warning(kindJob, "job-node-0", ReasonFailedCreate, quotaMsg, t0.Add(time.Second))},
			phase:  PhasePending, notIn: []string{"exceeded quota"},
		},
		"a missing Secret: the kubelet's FailedMount on a waiting pod": {
			pods:   []corev1.Pod{jobPod(1, corev1.PodPending, t0.Add(time.Second))},
			events: []corev1.Event{warning(kindPod, "job-node-0-1-abcde", ReasonFailedMount, mountMsg, t0.Add(5*time.Second))},
			phase:  PhasePending, trouble: true,
			inMessage: []string{"node 1 (pod job-node-0-1-abcde) cannot mount its volumes: " + mountMsg},
		},
		"FailedMount of a pod that runs now is old news": {
			pods:   []corev1.Pod{jobPod(1, corev1.PodRunning, t0.Add(time.Second))},
			events: []corev1.Event{warning(kindPod, "job-node-0-1-abcde", ReasonFailedMount, mountMsg, t0.Add(5*time.Second))},
			phase:  PhasePending, notIn: []string{"cannot mount"},
		},
		"FailedMount of a pod that is gone, or of another pod of that name, is not read": {
			pods: []corev1.Pod{jobPod(1, corev1.PodPending, t0.Add(time.Second))},
			events: func() []corev1.Event {
				gone := warning(kindPod, "job-node-0-0-zzzzz", ReasonFailedMount, mountMsg, t0.Add(5*time.Second))
				other := warning(kindPod, "job-node-0-1-abcde", ReasonFailedMount, mountMsg, t0.Add(5*time.Second))
				other.InvolvedObject.UID = "an-earlier-pod"
				return []corev1.Event{gone, other}
			}(),
			phase: PhasePending, notIn: []string{"cannot mount"},
		},
		"Events of another TrainJob's objects are not read": {
			events: []corev1.Event{
				warning(kindJobSet, "jobx", ReasonJobCreationFailed, invalidJobMsg, t0.Add(time.Second)),
				warning(kindJob, "other-node-0", ReasonFailedCreate, quotaMsg, t0.Add(time.Second)),
				warning(kindJob, "job-node-0-x", ReasonFailedCreate, quotaMsg, t0.Add(time.Second)),
			},
			phase: PhasePending, notIn: []string{"cannot create"},
		},
		"Events from before the TrainJob was created are about an earlier job of its name": {
			events: []corev1.Event{
				warning(kindJobSet, "job", ReasonJobCreationFailed, invalidJobMsg, t0.Add(-time.Hour)),
				warning(kindJob, "job-node-0", ReasonFailedCreate, quotaMsg, t0.Add(-time.Hour)),
			},
			phase: PhasePending, notIn: []string{"cannot create"},
		},
		"Normal Events and unread reasons are not read": {
			events: func() []corev1.Event {
				normal := warning(kindJob, "job-node-0", ReasonFailedCreate, quotaMsg, t0.Add(time.Second))
				normal.Type = corev1.EventTypeNormal
				return []corev1.Event{normal, warning(kindJob, "job-node-0", "BackoffLimitExceeded", "no", t0.Add(time.Second))}
			}(),
			phase: PhasePending, notIn: []string{"cannot create"},
		},
		"a running job is not held back by old Events": {
			pods: []corev1.Pod{jobPod(0, corev1.PodRunning, t0), jobPod(1, corev1.PodRunning, t0)},
			events: []corev1.Event{
				warning(kindJob, "job-node-0", ReasonFailedCreate, quotaMsg, t0.Add(time.Second)),
				warning(kindJobSet, "job", ReasonJobCreationFailed, invalidJobMsg, t0.Add(time.Second)),
			},
			phase: PhaseRunning, notIn: []string{"cannot create"},
		},
		"startTimeout fails with the cause": {
			pods:   []corev1.Pod{jobPod(0, corev1.PodRunning, t0.Add(time.Second))},
			events: []corev1.Event{warning(kindJob, "job-node-0", ReasonFailedCreate, quotaMsg, t0.Add(time.Second))},
			d:      Deadlines{StartTimeout: 30 * time.Second},
			phase:  PhaseFailed, reason: ReasonStartTimeout, delete: true, trouble: true,
			inMessage: []string{"did not start within 30s (startTimeout)", "exceeded quota: pods"},
		},
		"one line per object, bounded": {
			pods: []corev1.Pod{jobPod(0, corev1.PodPending, t0), jobPod(1, corev1.PodPending, t0)},
			events: []corev1.Event{
				warning(kindPod, "job-node-0-1-abcde", ReasonFailedMount, mountMsg, t0.Add(5*time.Second)),
				warning(kindPod, "job-node-0-0-abcde", ReasonFailedAttachVolume, "AttachVolume.Attach failed", t0.Add(5*time.Second)),
				warning(kindJob, "job-launcher-0", ReasonFailedCreate, "Error creating: a", t0.Add(time.Second)),
				warning(kindJob, "job-dataset-initializer-0", ReasonFailedCreate, "Error creating: b", t0.Add(time.Second)),
			},
			phase: PhasePending, trouble: true,
			inMessage: []string{"Job job-dataset-initializer-0 cannot create pods: Error creating: b; Job job-launcher-0 cannot create pods: Error creating: a; " +
				"node 0 (pod job-node-0-0-abcde) cannot attach its volumes: AttachVolume.Attach failed; and 1 more"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v := Decide(Snapshot{TrainJob: followJob(), Pods: tc.pods, Events: tc.events, Now: minute}, tc.d)
			assert.Equal(t, tc.phase, v.Phase, v.Message)
			if tc.reason != "" {
				assert.Equal(t, tc.reason, v.Reason)
			}
			assert.Equal(t, tc.delete, v.Delete)
			if tc.phase != PhaseFailed {
				assert.Equal(t, tc.trouble, v.Trouble, v.Message)
			}
			for _, m := range tc.inMessage {
				assert.Contains(t, v.Message, m)
			}
			for _, m := range tc.notIn {
				assert.NotContains(t, v.Message, m)
			}
		})
	}
}

func TestEventTrainJobs(t *testing.T) {
	cases := map[string]struct {
		kind, name, reason string
		want               []string
	}{
		"the TrainJob's own":            {"TrainJob", "job-0123456789ab", ReasonResourcesCreationFailed, []string{"job-0123456789ab"}},
		"its JobSet: the same name":     {kindJobSet, "job-0123456789ab", ReasonJobCreationFailed, []string{"job-0123456789ab"}},
		"a Job: every prefix":           {kindJob, "a-b-node-0", ReasonFailedCreate, []string{"a", "a-b", "a-b-node"}},
		"a pod: every prefix":           {kindPod, "a-node-0-1-xyz", ReasonFailedMount, []string{"a", "a-node", "a-node-0", "a-node-0-1"}},
		"a reason Decide does not read": {kindPod, "a-node-0-1-xyz", "BackOff", nil},
		"a kind Decide does not read":   {"Node", "a-b", ReasonFailedMount, nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := warning(tc.kind, tc.name, tc.reason, "m", t0)
			assert.Equal(t, tc.want, EventTrainJobs(&e))
		})
	}
}

func TestTrimEventKeepsWhatDecideReads(t *testing.T) {
	e := seriesEvent(kindJob, "job-node-0", ReasonFailedCreate, quotaMsg, t0, t0.Add(time.Minute))
	e.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}
	e.Source = corev1.EventSource{Component: "job-controller"}
	e.ReportingController, e.Action = "job-controller", "Create"
	e.Annotations = map[string]string{"a": "b"}
	got, err := TrimEvent(&e)
	require.NoError(t, err)
	trimmed := got.(*corev1.Event)
	assert.Empty(t, trimmed.ManagedFields)
	assert.Empty(t, trimmed.Annotations)
	assert.Empty(t, trimmed.Source.Component)
	assert.Empty(t, trimmed.ReportingController)
	assert.Equal(t, quotaMsg, trimmed.Message)
	assert.Equal(t, lastSeen(&e), lastSeen(trimmed))
	assert.Equal(t, e.InvolvedObject, trimmed.InvolvedObject)
	assert.Equal(t, e.Type, trimmed.Type)

	other := warning(kindPod, "p", "BackOff", "Back-off restarting failed container", t0)
	got, err = TrimEvent(&other)
	require.NoError(t, err)
	assert.Empty(t, got.(*corev1.Event).Message, "the message of an Event Decide does not read is not kept")

	tomb := "not an event"
	got, err = TrimEvent(tomb)
	require.NoError(t, err)
	assert.Equal(t, tomb, got)
}

func TestMaskPodName(t *testing.T) {
	cases := map[string]struct{ job, msg, want string }{
		"an indexed Job's pod": {"tj-node-0", `Error creating: pods "tj-node-0-1-4mqbt" is forbidden: exceeded quota`,
			`Error creating: pods "tj-node-0-1-xxxxx" is forbidden: exceeded quota`},
		"a non-indexed Job's pod": {"tj-launcher-0", `Error creating: pods "tj-launcher-0-ab12c" is forbidden`,
			`Error creating: pods "tj-launcher-0-xxxxx" is forbidden`},
		"another Job's pod is left": {"tj-node-0", `pods "other-node-0-1-4mqbt" is forbidden`, `pods "other-node-0-1-4mqbt" is forbidden`},
		"no pod named":              {"tj-node-0", `Error creating: Timeout: request did not complete`, `Error creating: Timeout: request did not complete`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, maskPodName(tc.job, tc.msg))
		})
	}
}

// An invalid Job ends the step however many newer Events of another reason the JobSet has.
func TestAnInvalidJobIsNotHiddenByANewerEventOfTheJobSet(t *testing.T) {
	events := []corev1.Event{
		warning(kindJobSet, "job", ReasonJobCreationFailed, invalidJobMsg, t0.Add(time.Second)),
		warning(kindJobSet, "job", ReasonPVCCreationFailed, `persistentvolumeclaims "x" is forbidden: exceeded quota`, t0.Add(5*time.Second)),
	}
	v := Decide(Snapshot{TrainJob: followJob(), Events: events, Now: t0.Add(time.Minute)}, Deadlines{})
	assert.Equal(t, PhaseFailed, v.Phase, v.Message)
	assert.Equal(t, ReasonJobCreationFailed, v.Reason)
}
