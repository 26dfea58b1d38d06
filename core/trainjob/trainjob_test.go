package trainjob

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/trainstep/trainstep/core/step"
)

func TestIdentityName(t *testing.T) {
	base := Identity{Engine: "argo", OwnerUID: "6b1c5a2e-0f7d-4a3e-9c1b-1234567890ab", StepKey: "my-dag.train(0)"}
	cases := map[string]Identity{
		"argo node name": base,
		"long key":       {Engine: "tekton", OwnerUID: "u", StepKey: strings.Repeat("very-long-step-", 20)},
		"leading digits": {Engine: "cli", OwnerUID: "u", StepKey: "123-train"},
		"only symbols":   {Engine: "cli", OwnerUID: "u", StepKey: "((()))"},
		"unicode":        {Engine: "cli", OwnerUID: "u", StepKey: "训练步骤"},
	}
	for name, id := range cases {
		t.Run(name, func(t *testing.T) {
			n := id.Name()
			assert.Empty(t, validation.IsDNS1035Label(n), n)
			assert.LessOrEqual(t, len(n), MaxNameLength, "JobSet's pod names append -<replicatedJob>-<i>-<j>-xxxxx")
			assert.Equal(t, n, id.Name(), "deterministic")
			for k, v := range id.Labels() {
				assert.Empty(t, validation.IsQualifiedName(k))
				assert.Empty(t, validation.IsValidLabelValue(v), "%s=%s", k, v)
			}
		})
	}
	assert.Equal(t, "my-dag-train-0-", base.Name()[:15])
	argoKey := Identity{Engine: "argo", OwnerUID: "u", StepKey: "train-dag-x7k2p.train"}
	assert.Regexp(t, `^dag-x7k2p-train-[0-9a-f]{12}$`, argoKey.Name(), "leading segments go first; the step's own name stays")
	retry := base
	retry.Attempt = 1
	other := base
	other.OwnerUID = "another-run"
	assert.NotEqual(t, base.Name(), retry.Name())
	assert.NotEqual(t, base.Name(), other.Name())
	assert.True(t, base.Owns(base.Labels()))
	assert.False(t, base.Owns(retry.Labels()))
	assert.False(t, base.Owns(map[string]string{"team": "a"}))

	// Without a run the name is what it always was (TrainJobs made before Run existed are found).
	assert.Equal(t, "my-dag-train-0-b57875092526", base.Name())
	assert.NotContains(t, base.Labels(), LabelRun)
	rerun := base
	rerun.Run = "1796106843"
	assert.NotEqual(t, base.Name(), rerun.Name(), "a new incarnation of the run gets a new TrainJob")
	assert.Equal(t, "1796106843", rerun.Labels()[LabelRun])
	assert.False(t, base.Owns(rerun.Labels()))
	assert.False(t, rerun.Owns(base.Labels()))
}

func cond(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: reason + " message", LastTransitionTime: metav1.NewTime(time.Unix(1000, 0))}
}

func pod(job, rj string, idx int, phase corev1.PodPhase) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job + "-" + rj + "-" + string(rune('0'+idx)), Labels: map[string]string{
		LabelJobSetName: job, LabelReplicatedJob: rj, LabelCompletionIndex: string(rune('0' + idx))}},
		Status: corev1.PodStatus{Phase: phase}}
}

func marked(tj *trainer.TrainJob, at string) *trainer.TrainJob {
	tj.Annotations = map[string]string{AnnotationStartedAt: at}
	return tj
}

func TestObserve(t *testing.T) {
	tj := func(nodes int32, suspend bool, conds ...metav1.Condition) *trainer.TrainJob {
		return &trainer.TrainJob{
			ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns", CreationTimestamp: metav1.NewTime(time.Unix(900, 0)), Labels: map[string]string{LabelFramework: "torch"}},
			Spec:       trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"}, Suspend: ptr.To(suspend), Trainer: &trainer.Trainer{NumNodes: ptr.To(nodes)}},
			Status:     trainer.TrainJobStatus{Conditions: conds},
		}
	}
	running := []corev1.Pod{pod("job", "node", 0, corev1.PodRunning), pod("job", "node", 1, corev1.PodRunning)}
	cases := map[string]struct {
		tj      *trainer.TrainJob
		pods    []corev1.Pod
		phase   Phase
		reason  string
		running int32
		started bool
		message string
	}{
		"no pods yet":        {tj: tj(2, false), phase: PhasePending, reason: "Pending"},
		"one of two running": {tj: tj(2, false), pods: running[:1], phase: PhasePending, running: 1},
		"all running":        {tj: tj(2, false), pods: running, phase: PhaseRunning, running: 2, started: true},
		"other jobs' pods":   {tj: tj(1, false), pods: []corev1.Pod{pod("other", "node", 0, corev1.PodRunning)}, phase: PhasePending},
		"an initializer running has started": {tj: tj(1, false), pods: []corev1.Pod{pod("job", "dataset-initializer", 0, corev1.PodRunning)}, phase: PhaseRunning, started: true,
			message: "TrainJob job is initializing: dataset-initializer running"},
		"initializers done, nodes pending: started": {tj: tj(1, false), pods: []corev1.Pod{pod("job", "dataset-initializer", 0, corev1.PodSucceeded),
			pod("job", "model-initializer", 0, corev1.PodSucceeded), pod("job", "node", 0, corev1.PodPending)}, phase: PhaseRunning, started: true,
			message: "TrainJob job is running: 0/1 nodes"},
		"one initializer running, one done": {tj: tj(1, false), pods: []corev1.Pod{pod("job", "dataset-initializer", 0, corev1.PodSucceeded),
			pod("job", "model-initializer", 0, corev1.PodRunning)}, phase: PhaseRunning, started: true,
			message: "TrainJob job is initializing: model-initializer running (dataset-initializer done)"},
		"an initializer pending has not started": {tj: tj(1, false), pods: []corev1.Pod{pod("job", "model-initializer", 0, corev1.PodPending)}, phase: PhasePending},
		"recorded started, a node replaced: still running": {tj: marked(tj(2, false), "2026-12-01T06:00:00Z"), pods: running[:1], phase: PhaseRunning, running: 1,
			message: "TrainJob job is running: 1/2 nodes"},
		"recorded started, suspended: suspended":         {tj: marked(tj(2, true), "2026-12-01T06:00:00Z"), phase: PhaseSuspended},
		"a started-at that is not a time is not started": {tj: marked(tj(2, false), "yesterday"), pods: running[:1], phase: PhasePending, running: 1},
		"mpi launcher counts":                            {tj: tj(2, false), pods: []corev1.Pod{pod("job", "launcher", 0, corev1.PodRunning), pod("job", "node", 0, corev1.PodRunning)}, phase: PhaseRunning, running: 2, started: true},
		"suspended by kueue":                             {tj: tj(2, true, cond("Suspended", "True", "Suspended")), phase: PhaseSuspended, reason: "Suspended"},
		"spec.suspend alone":                             {tj: tj(2, true), phase: PhaseSuspended},
		"resumed, running (#803)":                        {tj: tj(2, false, cond("Suspended", "False", "Resumed")), pods: running, phase: PhaseRunning, running: 2, started: true},
		"complete after suspend (not by position)": {tj: tj(2, false, cond("Suspended", "False", "Resumed"), cond("Complete", "True", "AllJobsCompleted")),
			pods: running, phase: PhaseSucceeded, reason: "AllJobsCompleted", running: 2, started: true},
		"failed":                     {tj: tj(1, false, cond("Failed", "True", "FailedJobs")), phase: PhaseFailed, reason: "FailedJobs"},
		"failed wins":                {tj: tj(1, false, cond("Complete", "True", "AllJobsCompleted"), cond("Failed", "True", "DeadlineExceeded")), phase: PhaseFailed, reason: "DeadlineExceeded"},
		"failed false is not failed": {tj: tj(1, false, cond("Failed", "False", "x")), phase: PhasePending},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := Observe(tc.tj, tc.pods)
			assert.Equal(t, tc.phase, o.Phase)
			if tc.reason != "" {
				assert.Equal(t, tc.reason, o.Reason)
			}
			assert.Equal(t, tc.running, o.RunningNodes)
			assert.Equal(t, tc.started, o.Started, "started now")
			assert.Equal(t, tc.phase.Terminal(), o.CompletionTime != nil)
			if tc.message != "" {
				assert.Equal(t, tc.message, o.Message)
			}
		})
	}
}

func TestObserveFailedPodAndOutputs(t *testing.T) {
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns", CreationTimestamp: metav1.NewTime(time.Unix(1000, 0)),
			Labels: map[string]string{LabelFramework: "jax", LabelNumNodes: "3"}},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "jax-distributed"}},
		Status: trainer.TrainJobStatus{
			Conditions:    []metav1.Condition{{Type: "Failed", Status: "True", Reason: "FailedJobs", Message: "boom", LastTransitionTime: metav1.NewTime(time.Unix(1090, 0))}},
			TrainerStatus: &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](40), Metrics: []trainer.Metric{{Name: "loss", Value: "0.5"}}},
		},
	}
	pods := []corev1.Pod{pod("job", "node", 0, corev1.PodSucceeded), pod("job", "node", 2, corev1.PodFailed), pod("job", "node", 1, corev1.PodSucceeded)}
	o := Observe(tj, pods).WithLogTail("job-node-2", NodeContainer, "Traceback\nValueError: x\n")
	assert.Equal(t, "job-node-2", o.FailedPod)
	assert.Equal(t, "boom; node 2 (pod job-node-2) failed (no exit code recorded)\nlast lines of job-node-2:\nTraceback\nValueError: x", o.Message)
	assert.Equal(t, map[string]string{
		OutName: "job", OutNamespace: "ns", OutRuntime: "jax-distributed", OutFramework: "jax", OutPhase: "Failed", OutReason: "FailedJobs",
		OutMessage: o.Message, OutStartTime: "1970-01-01T00:16:40Z", OutCompletionTime: "1970-01-01T00:18:10Z", OutDuration: "90",
		OutNumNodes: "3", OutProgress: "40", OutMetrics: `{"loss":"0.5"}`, OutResult: "",
		MetricPrefix + "loss": "0.5",
		OutQueueWait:          "", OutPreemptions: "0", OutEvictions: "0", OutCluster: "", OutUndelivered: "",
		OutFailureClass: "unknown", OutRetryable: "false",
		// The pods record no container start: the job never trained, by its records.
		OutInitializing: "90", OutTraining: "0", OutLost: "0", OutGPUHours: "0",
	}, o.Outputs())
	assert.Len(t, o.Outputs(), len(OutputNames)+1, "every output, and one per metric")
}

func TestWithEventsSurfacesResourceCreationFailures(t *testing.T) {
	created := time.Unix(100, 0)
	ev := func(name, uid, reason, msg string, at int64) corev1.Event {
		return corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "TrainJob", Name: name, UID: types.UID(uid)}, Reason: reason, Message: msg,
			LastTimestamp: metav1.NewTime(time.Unix(at, 0))}
	}
	events := []corev1.Event{
		ev("job", "tj-uid", ReasonResourcesCreationFailed, "old: quota", 110),
		ev("job", "tj-uid", ReasonResourcesCreationFailed, "jobsets.jobset.x-k8s.io is forbidden", 120),
		ev("job", "tj-uid", "Created", "fine", 130),
		ev("other", "other-uid", ReasonResourcesCreationFailed, "not ours", 140),
		ev("job", "deleted-uid", ReasonResourcesCreationFailed, "a deleted job's of the same name", 150),
		ev("job", "", ReasonResourcesCreationFailed, "a deleted job's, before this one was created", 50),
	}
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "job", UID: "tj-uid", CreationTimestamp: metav1.NewTime(created)}}
	pending := Observation{Name: "job", Phase: PhasePending, Reason: "Pending", Message: "TrainJob job is starting: 0/1 nodes running"}
	o := pending.WithEvents(tj, nil, events)
	assert.Equal(t, ReasonResourcesCreationFailed, o.Reason)
	assert.Equal(t, "TrainJob job is starting: 0/1 nodes running; the Trainer cannot create its resources: jobsets.jobset.x-k8s.io is forbidden", o.Message)
	running := Observation{Name: "job", Phase: PhaseRunning, Message: "running"}
	assert.Equal(t, running, running.WithEvents(tj, nil, events), "only a job that has not started is explained by it")

	healed := tj.DeepCopy()
	healed.Status.JobsStatus = []trainer.JobStatus{{Name: NodeJob}}
	assert.Equal(t, pending, pending.WithEvents(healed, nil, events), "its JobSet exists: the failure healed")
	assert.Equal(t, pending, pending.WithEvents(tj, []corev1.Pod{pod("job", NodeJob, 0, corev1.PodPending)}, events), "its pods exist: the failure healed")
	assert.Equal(t, pending, pending.WithEvents(tj, nil, events[3:]), "another TrainJob's, a deleted one's of the same name")
}

func TestNamePrefix(t *testing.T) {
	cases := map[string]struct{ key, want string }{
		"fits":                        {"train", "train"},
		"symbols become dashes":       {"My_DAG.train(0)", "my-dag-train-0"},
		"leading segments drop first": {"train-dag-x7k2p.train", "dag-x7k2p-train"},
		"drops until it fits":         {"a.b.c.d.e.f.g.h.i.j.k-train-step", "g-h-i-j-k-train-step"},
		"one long segment is cut":     {"averyveryveryverylongstepname", "averyveryveryverylon"},
		"digits never lead":           {"123-train", "train"},
		"nothing left":                {"((()))", "trainjob"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := namePrefix(tc.key, MaxNameLength-hashLength-1)
			assert.Equal(t, tc.want, got)
			assert.LessOrEqual(t, len(got), MaxNameLength-hashLength-1)
		})
	}
}

func TestResultFromTheTerminationMessage(t *testing.T) {
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns"}}
	done := func(idx int, msg string) corev1.Pod {
		p := pod("job", "node", idx, corev1.PodSucceeded)
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: NodeContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: msg}}}}
		return p
	}
	keys := `{"accuracy": 0.93, "model_uri": "s3://b/m", "bad.key": 1, "-lead": 2, "nested": {"a": [1, 2]}, "none": null}`
	o := Observe(tj, []corev1.Pod{done(1, "someone else's message"), done(0, `{"`+ResultMarker+`": `+keys+`}`)})
	out := o.Outputs()
	assert.JSONEq(t, keys, out[OutResult])
	assert.Equal(t, "0.93", out["result-accuracy"])
	assert.Equal(t, "s3://b/m", out["result-model_uri"], "a string is itself, unquoted")
	assert.Equal(t, `{"a":[1,2]}`, out["result-nested"])
	assert.Equal(t, "null", out["result-none"])
	assert.NotContains(t, out, "result-bad.key", "Argo parameter names have no dots")
	assert.NotContains(t, out, "result--lead", "Tekton result names start with an alphanumeric")
	assert.Equal(t, append(slices.Clone(OutputNames), "result-accuracy", "result-model_uri", "result-nested", "result-none"), OrderedNames(out))

	assert.Empty(t, Observe(tj, []corev1.Pod{done(0, "plain text")}).Result, "only our marker is a result")
	assert.Equal(t, `[1,2]`, Observe(tj, []corev1.Pod{done(0, `{"`+ResultMarker+`": [1, 2]}`)}).Result)

	many := map[string]int{}
	for i := range 50 {
		many[fmt.Sprintf("k%02d", i)] = i
	}
	b, _ := json.Marshal(map[string]any{ResultMarker: many})
	out = Observe(tj, []corev1.Pod{done(0, string(b))}).Outputs()
	assert.Len(t, out, len(OutputNames)+50, "every key is an output: a declared one is never empty")
	assert.Equal(t, "0", out["result-k00"])
	assert.Equal(t, "49", out["result-k49"])
	assert.True(t, IsResultKeyOutput("result-accuracy"))
	assert.False(t, IsResultKeyOutput("result-a.b"))
	assert.False(t, IsResultKeyOutput("accuracy"))
}

func TestProgress(t *testing.T) {
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "job", Labels: map[string]string{LabelNumNodes: "2"}}}
	pods := []corev1.Pod{pod("job", "node", 0, corev1.PodRunning), pod("job", "node", 1, corev1.PodPending)}
	o := Observe(tj, pods)
	assert.Equal(t, "1/2", o.ProgressFraction(), "running nodes / nodes without a Trainer progress")
	pods[1].Status.Phase = corev1.PodRunning
	o = Observe(tj, pods)
	assert.Equal(t, "2/2", o.ProgressFraction())
	assert.Equal(t, "TrainJob job is running: 2/2 nodes", o.Message)
	tj.Status.TrainerStatus = &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](40), EstimatedRemainingSeconds: ptr.To[int32](90)}
	o = Observe(tj, pods)
	assert.Equal(t, "40/100", o.ProgressFraction(), "the Trainer's percentage when it reports one")
	assert.Equal(t, "TrainJob job is running: 2/2 nodes · 40% · 1m30s left", o.Message)
	tj.Status.TrainerStatus = nil
	tj.Status.Conditions = []metav1.Condition{cond("Complete", "True", "AllJobsCompleted")}
	pods[0].Status.Phase, pods[1].Status.Phase = corev1.PodSucceeded, corev1.PodSucceeded
	assert.Equal(t, "2/2", Observe(tj, pods).ProgressFraction())
}

// namePrefix replaces the readable part only: the hash, the labels and so whose job it is stay.
func TestIdentityNamePrefix(t *testing.T) {
	base := Identity{Engine: "argo", OwnerUID: "6b1c5a2e-0f7d-4a3e-9c1b-1234567890ab", StepKey: "my-dag.train(0)"}
	hash := strings.TrimPrefix(base.Name(), "my-dag-train-0-")
	cases := map[string]struct{ prefix, want string }{
		"none: from the step key": {"", "my-dag-train-0-" + hash},
		"a prefix":                {"finetune-llama", "finetune-llama-" + hash},
		"generateName's dash":     {"finetune-", "finetune-" + hash},
		"the longest step allows": {strings.Repeat("a", step.MaxNamePrefix), strings.Repeat("a", step.MaxNamePrefix) + "-" + hash},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			id := base
			id.NamePrefix = tc.prefix
			n := id.Name()
			assert.Equal(t, tc.want, n)
			assert.Empty(t, validation.IsDNS1035Label(n), n)
			assert.LessOrEqual(t, len(n), MaxNameLength)
			assert.Equal(t, base.Labels(), id.Labels(), "the prefix is not part of the identity")
			assert.True(t, id.Owns(base.Labels()))
		})
	}
	assert.Equal(t, MaxNameLength-hashLength-1, step.MaxNamePrefix, "step's limit is the room Name leaves")
}
