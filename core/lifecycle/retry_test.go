package lifecycle

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/trainstep/trainstep/core/trainjob"
)

// retryJob is attempt a of the test step's TrainJob, created at t0 plus created.
func retryJob(a int, created time.Duration, conds ...metav1.Condition) *trainer.TrainJob {
	id := identity()
	id.Attempt = a
	return &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: id.Name(), Namespace: "ns", Labels: id.Labels(), CreationTimestamp: metav1.NewTime(t0.Add(created))},
		Spec:       trainer.TrainJobSpec{Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](1)}},
		Status:     trainer.TrainJobStatus{Conditions: conds},
	}
}

// replacing is a retry's TrainJob as the retry that made it stamps it.
func replacing(tj, old *trainer.TrainJob) *trainer.TrainJob {
	tj.Annotations = map[string]string{annotationRetryOf: old.Name, annotationStepSince: old.CreationTimestamp.UTC().Format(time.RFC3339)}
	return tj
}

func failedAt(at time.Duration) metav1.Condition {
	return metav1.Condition{Type: trainer.TrainJobFailed, Status: metav1.ConditionTrue, Reason: "FailedJobs",
		Message: "jobset failed", LastTransitionTime: metav1.NewTime(t0.Add(at))}
}

// nodePod is node 0 of tj, ended as the kubelet records an exit: reason and code.
func nodePod(tj *trainer.TrainJob, phase corev1.PodPhase, reason string, code int32) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: tj.Name + "-node-0-0", Namespace: "ns", Labels: map[string]string{
			trainjob.LabelJobSetName: tj.Name, trainjob.LabelReplicatedJob: trainjob.NodeJob, trainjob.LabelCompletionIndex: "0"}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: trainjob.NodeContainer}}},
		Status: corev1.PodStatus{Phase: phase},
	}
	if reason != "" {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: trainjob.NodeContainer,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code}}}}
	}
	return p
}

// TestAStepRetriesARetryableFailureItself is the step's own retry (retry.go): what a look does
// with its TrainJob's end, by cause, retries left, backoff and the step's timeout.
func TestAStepRetriesARetryableFailureItself(t *testing.T) {
	const retrying = validStep + "retry: {limit: 2}\n"
	cases := map[string]struct {
		spec        string
		faceAttempt int
		jobs        []*trainer.TrainJob
		pods        func(tj *trainer.TrainJob) []corev1.Pod
		deadlines   trainjob.Deadlines
		recorded    *int  // the attempt whose name the face recorded
		refuse      error // the apiserver's answer to every create
		// created is the attempt a new TrainJob was made for, -1 for none; gone the attempts
		// deleted.
		created   int
		gone      []int
		phase     trainjob.Phase
		reason    string
		inMessage string
		wake      time.Time
		stepSince time.Duration // when the step's first TrainJob of the face's attempt was made, after t0
	}{
		"OOMKilled: retried at once as the next attempt, the failed job kept": {
			spec: retrying, jobs: []*trainer.TrainJob{retryJob(0, 0, failedAt(50*time.Minute))},
			pods: func(tj *trainer.TrainJob) []corev1.Pod {
				return []corev1.Pod{nodePod(tj, corev1.PodFailed, "OOMKilled", 137)}
			},
			created: 1, phase: trainjob.PhasePending, inMessage: "failed (oom): jobset failed; node 0 (pod train-8b06e7eac71e-node-0-0) failed (exit code 137, OOMKilled); retried as TrainJob",
		},
		"the training code failed: not retried": {
			spec: retrying, jobs: []*trainer.TrainJob{retryJob(0, 0, failedAt(50*time.Minute))},
			pods: func(tj *trainer.TrainJob) []corev1.Pod {
				return []corev1.Pod{nodePod(tj, corev1.PodFailed, "Error", 1)}
			},
			created: -1, phase: trainjob.PhaseFailed, inMessage: "jobset failed",
		},
		"no retry block: not retried": {
			spec: validStep, jobs: []*trainer.TrainJob{retryJob(0, 0, failedAt(50*time.Minute))},
			pods: func(tj *trainer.TrainJob) []corev1.Pod {
				return []corev1.Pod{nodePod(tj, corev1.PodFailed, "OOMKilled", 137)}
			},
			created: -1, phase: trainjob.PhaseFailed,
		},
		"the last retry failed: the step fails": {
			spec: retrying, jobs: []*trainer.TrainJob{retryJob(0, 0, failedAt(time.Minute)), retryJob(1, 2*time.Minute, failedAt(3*time.Minute)),
				retryJob(2, 4*time.Minute, failedAt(50*time.Minute))},
			pods: func(tj *trainer.TrainJob) []corev1.Pod {
				return []corev1.Pod{nodePod(tj, corev1.PodFailed, "OOMKilled", 137)}
			},
			created: -1, phase: trainjob.PhaseFailed, inMessage: "jobset failed",
		},
		"a backoff not yet over: waits, says when": {
			spec: validStep + "retry: {limit: 2, backoff: 30m}\n", jobs: []*trainer.TrainJob{retryJob(0, 0, failedAt(50*time.Minute))},
			pods: func(tj *trainer.TrainJob) []corev1.Pod {
				return []corev1.Pod{nodePod(tj, corev1.PodFailed, "OOMKilled", 137)}
			},
			created: -1, phase: trainjob.PhasePending, reason: ReasonRetrying, wake: t0.Add(80 * time.Minute),
			inMessage: "failed (oom); trainstep retries it at 2026-12-03T09:20:00Z (retry 1 of 2)",
		},
		"a backoff that ends after the step's timeout: not retried": {
			spec: validStep + "retry: {limit: 2, backoff: 30m}\n", jobs: []*trainer.TrainJob{retryJob(0, 0, failedAt(50*time.Minute))},
			deadlines: trainjob.Deadlines{Timeout: 70 * time.Minute},
			pods: func(tj *trainer.TrainJob) []corev1.Pod {
				return []corev1.Pod{nodePod(tj, corev1.PodFailed, "OOMKilled", 137)}
			},
			created: -1, phase: trainjob.PhaseFailed,
		},
		"a backoff that ended before the step's timeout, looked at only after it: not retried": {
			spec: validStep + "retry: {limit: 2, backoff: 1m}\n", jobs: []*trainer.TrainJob{retryJob(0, 0, failedAt(50*time.Minute))},
			deadlines: trainjob.Deadlines{Timeout: 55 * time.Minute},
			pods: func(tj *trainer.TrainJob) []corev1.Pod {
				return []corev1.Pod{nodePod(tj, corev1.PodFailed, "OOMKilled", 137)}
			},
			created: -1, phase: trainjob.PhaseFailed, inMessage: "jobset failed",
		},
		"never started within startTimeout: deleted, retried at once": {
			spec: retrying, jobs: []*trainer.TrainJob{retryJob(0, 0)}, deadlines: trainjob.Deadlines{StartTimeout: 30 * time.Minute},
			pods:    func(tj *trainer.TrainJob) []corev1.Pod { return []corev1.Pod{nodePod(tj, corev1.PodPending, "", 0)} },
			created: 1, gone: []int{0}, phase: trainjob.PhasePending, inMessage: "failed (unschedulable)",
		},
		"a retry is followed, not made again": {
			spec: retrying, jobs: []*trainer.TrainJob{retryJob(0, 0, failedAt(time.Minute)), retryJob(1, 2*time.Minute)},
			pods:    func(tj *trainer.TrainJob) []corev1.Pod { return []corev1.Pod{nodePod(tj, corev1.PodRunning, "", 0)} },
			created: -1, phase: trainjob.PhaseRunning,
		},
		"a retry's startTimeout counts from its own creation": {
			spec: retrying, jobs: []*trainer.TrainJob{retryJob(0, 0, failedAt(time.Minute)), retryJob(1, 45*time.Minute)},
			deadlines: trainjob.Deadlines{StartTimeout: 30 * time.Minute},
			pods:      func(tj *trainer.TrainJob) []corev1.Pod { return []corev1.Pod{nodePod(tj, corev1.PodPending, "", 0)} },
			created:   -1, phase: trainjob.PhasePending, wake: t0.Add(75 * time.Minute),
		},
		"the face's second attempt retries within its own attempts": {
			spec: retrying, faceAttempt: 1, jobs: []*trainer.TrainJob{retryJob(2, 0, failedAt(time.Minute)), retryJob(3, 2*time.Minute, failedAt(50*time.Minute))}, stepSince: 2 * time.Minute,
			pods: func(tj *trainer.TrainJob) []corev1.Pod {
				return []corev1.Pod{nodePod(tj, corev1.PodFailed, "OOMKilled", 137)}
			},
			created: 4, phase: trainjob.PhasePending, inMessage: "(retry 1 of 2)",
		},
		"the job a retry replaced still there and not ended (its delete failed): deleted": {
			spec: retrying, jobs: []*trainer.TrainJob{retryJob(0, 0), replacing(retryJob(1, 2*time.Minute), retryJob(0, 0))},
			pods:    func(tj *trainer.TrainJob) []corev1.Pod { return []corev1.Pod{nodePod(tj, corev1.PodRunning, "", 0)} },
			created: -1, gone: []int{0}, phase: trainjob.PhaseRunning,
		},
		"the retry refused for good: the step ends as its job did, which a deadline deletes": {
			spec: retrying, jobs: []*trainer.TrainJob{retryJob(0, 0)}, deadlines: trainjob.Deadlines{StartTimeout: 30 * time.Minute},
			refuse:  apierrors.NewForbidden(trainer.GroupVersion.WithResource("trainjobs").GroupResource(), "x", errors.New("no create")),
			pods:    func(tj *trainer.TrainJob) []corev1.Pod { return []corev1.Pod{nodePod(tj, corev1.PodPending, "", 0)} },
			created: -1, gone: []int{0}, phase: trainjob.PhaseFailed, reason: trainjob.ReasonStartTimeout,
			inMessage: "; trainstep could not retry it: trainstep may not create the TrainJob",
		},
		"a recorded retry someone deleted: the step fails, nothing trains again": {
			spec: retrying, jobs: []*trainer.TrainJob{retryJob(0, 0, failedAt(time.Minute))}, recorded: ptr.To(1),
			pods: func(tj *trainer.TrainJob) []corev1.Pod {
				return []corev1.Pod{nodePod(tj, corev1.PodFailed, "OOMKilled", 137)}
			},
			created: -1, phase: trainjob.PhaseFailed, reason: ReasonTrainJobDeleted,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := make([]client.Object, 0, len(tc.jobs))
			for _, j := range tc.jobs {
				objs = append(objs, j)
			}
			e, c := engine(t, tc.refuse, objs...)
			e.Snapshot = func(_ context.Context, tj *trainer.TrainJob) (trainjob.Snapshot, error) {
				return trainjob.Snapshot{TrainJob: tj, Pods: tc.pods(tj)}, nil
			}
			id := identity()
			id.Attempt = tc.faceAttempt
			s := Step{Spec: parse(t, tc.spec), Namespace: "ns", Identity: id, Deadlines: tc.deadlines}
			if tc.recorded != nil {
				rec := identity()
				rec.Attempt = *tc.recorded
				s.Recorded = rec.Name()
			}
			st := e.Look(t.Context(), s)
			require.NoError(t, st.Err)
			assert.Equal(t, tc.phase, st.Phase, st.Message)
			if tc.reason != "" {
				assert.Equal(t, tc.reason, st.Reason)
			}
			assert.Contains(t, st.Message, tc.inMessage)
			if !tc.wake.IsZero() {
				assert.True(t, tc.wake.Equal(st.Wake), "wake at %s, not %s", tc.wake, st.Wake)
			}
			list := &trainer.TrainJobList{}
			require.NoError(t, c.List(t.Context(), list))
			assert.Len(t, list.Items, len(tc.jobs)-len(tc.gone)+map[bool]int{true: 1}[tc.created >= 0])
			assert.Equal(t, tc.created >= 0, st.Created)
			if tc.created >= 0 {
				want := identity()
				want.Attempt = tc.created
				assert.Equal(t, want.Name(), st.Name)
				made := &trainer.TrainJob{}
				require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: want.Name()}, made))
				assert.Equal(t, strconv.Itoa(tc.created), made.Labels[trainjob.LabelAttempt])
				assert.Equal(t, tc.jobs[len(tc.jobs)-1].Name, made.Annotations[annotationRetryOf])
				assert.Equal(t, t0.Add(tc.stepSince).Format(time.RFC3339), made.Annotations[annotationStepSince],
					"the step's timeout bounds every retry from its first TrainJob")
			}
			for _, a := range tc.gone {
				gone := identity()
				gone.Attempt = a
				err := c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: gone.Name()}, &trainer.TrainJob{})
				assert.True(t, apierrors.IsNotFound(err), "attempt %d deleted: %v", a, err)
			}
		})
	}
}

// A TrainJob a retry replaced that is left running (a deadline ended it and its delete failed)
// is ended at every later look of the step, whatever the look does, and so is each before it;
// one let go of for the steps that follow it, or kept, is not.
func TestEarlierRetriesLeftRunningAreEnded(t *testing.T) {
	held := retryJob(0, 0)
	other, _ := twoRuns(t)
	other.Identity.OwnerUID = "uid-9"
	k, v := other.Identity.HoldLabel()
	held.Labels[k] = v
	kept := retryJob(0, 0)
	kept.Annotations = map[string]string{trainjob.AnnotationKept: "the step's timeout passed; keepOnTimeout"}
	cases := map[string]struct {
		jobs     []*trainer.TrainJob
		step     func(s *Step)
		gone     []int
		reason   string
		stopped  bool
		retained []int
	}{
		"two retries in a row whose deletes failed: both ended at the next retry's look": {
			jobs: []*trainer.TrainJob{retryJob(0, 0), replacing(retryJob(1, 2*time.Minute), retryJob(0, 0)),
				replacing(retryJob(2, 4*time.Minute), retryJob(1, 2*time.Minute))},
			gone: []int{0, 1}, retained: []int{2},
		},
		"the step stopped: the replaced job too": {
			jobs: []*trainer.TrainJob{retryJob(0, 0), replacing(retryJob(1, 2*time.Minute), retryJob(0, 0))},
			step: func(s *Step) { s.Stop = true }, stopped: true, gone: []int{0, 1},
		},
		"the retry's job deleted by someone: the step fails, and ends the replaced job": {
			jobs: []*trainer.TrainJob{retryJob(0, 0)}, step: func(s *Step) { s.Recorded = atAttempt(1).Name() },
			reason: ReasonTrainJobDeleted, gone: []int{0},
		},
		"let go of for another step that follows it: left running": {
			jobs: []*trainer.TrainJob{held, replacing(retryJob(1, 2*time.Minute), retryJob(0, 0))}, retained: []int{0, 1},
		},
		"kept: left running": {
			jobs: []*trainer.TrainJob{kept, replacing(retryJob(1, 2*time.Minute), retryJob(0, 0))}, retained: []int{0, 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := make([]client.Object, 0, len(tc.jobs))
			for _, j := range tc.jobs {
				objs = append(objs, j.DeepCopy())
			}
			e, c := engine(t, nil, objs...)
			e.Snapshot = func(_ context.Context, tj *trainer.TrainJob) (trainjob.Snapshot, error) {
				return trainjob.Snapshot{TrainJob: tj, Pods: []corev1.Pod{nodePod(tj, corev1.PodRunning, "", 0)}}, nil
			}
			s := Step{Spec: parse(t, validStep+"retry: {limit: 2}\n"), Namespace: "ns", Identity: identity()}
			if tc.step != nil {
				tc.step(&s)
			}
			st := e.Look(t.Context(), s)
			require.NoError(t, st.Err)
			assert.Equal(t, tc.stopped, st.Stopped)
			if tc.reason != "" {
				assert.Equal(t, tc.reason, st.Reason, st.Message)
			}
			for _, a := range tc.gone {
				err := c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: atAttempt(a).Name()}, &trainer.TrainJob{})
				assert.True(t, apierrors.IsNotFound(err), "attempt %d deleted: %v", a, err)
			}
			for _, a := range tc.retained {
				assert.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: atAttempt(a).Name()}, &trainer.TrainJob{}), "attempt %d left", a)
			}
		})
	}
}

// atAttempt is the test step's identity at TrainJob attempt a.
func atAttempt(a int) trainjob.Identity {
	id := identity()
	id.Attempt = a
	return id
}

// A step whose retry ended while the job that retry replaced is left running (its delete failed
// again) has not ended: its face looks again, and the step ends once that job is gone.
func TestAStepEndsOnlyOnceItsRetriesLeftNothingRunning(t *testing.T) {
	replaced := replacing(retryJob(1, 2*time.Minute, failedAt(3*time.Minute)), retryJob(0, 0))
	e, c := engine(t, nil, retryJob(0, 0), replaced)
	failures := 1
	e.Writer = interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if failures > 0 {
				failures--
				return apierrors.NewInternalError(errors.New("etcd is slow"))
			}
			return c.Delete(ctx, obj, opts...)
		},
	})
	e.Snapshot = func(_ context.Context, tj *trainer.TrainJob) (trainjob.Snapshot, error) {
		return trainjob.Snapshot{TrainJob: tj, Pods: []corev1.Pod{nodePod(tj, corev1.PodFailed, "Error", 1)}}, nil
	}
	s := Step{Spec: parse(t, validStep+"retry: {limit: 2}\n"), Namespace: "ns", Identity: identity()}

	st := e.Look(t.Context(), s)
	require.Error(t, st.Err)
	assert.False(t, st.Done(), "not ended while the replaced job runs: %s", st.Message)
	assert.Contains(t, st.Message, "ending TrainJob "+atAttempt(0).Name()+", which a retry replaced")

	st = e.Look(t.Context(), s)
	require.NoError(t, st.Err)
	assert.True(t, st.Done())
	assert.Equal(t, trainjob.PhaseFailed, st.Phase, st.Message)
	assert.Equal(t, trainjob.ClassCode, st.Failure.Class)
	err := c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: atAttempt(0).Name()}, &trainer.TrainJob{})
	assert.True(t, apierrors.IsNotFound(err), "the replaced job is gone: %v", err)
}
