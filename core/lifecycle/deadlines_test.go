package lifecycle

import (
	"context"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/trainstep/trainstep/core/stepcache"
	"github.com/trainstep/trainstep/core/trainjob"
)

// A step whose TrainJob cannot be created (a webhook with no endpoint answers 500 to every
// create) ends at its timeout, counted from when the face began it where the face keeps no
// Since of its own (`executor run`, an Argo node the cache does not show), and is looked at
// again by then at the latest.
func TestAStepWhoseCreateKeepsFailingEndsAtItsTimeout(t *testing.T) {
	e, c := engine(t, apierrors.NewInternalError(context.DeadlineExceeded))
	clock := clocktesting.NewFakePassiveClock(t0)
	e.Clock = clock
	s := Step{Spec: parse(t, validStep), Namespace: "ns", Identity: identity(), Begun: t0,
		Deadlines: trainjob.Deadlines{Timeout: 20 * time.Second}}

	st := e.Look(t.Context(), s)
	require.Error(t, st.Err, st.Message)
	assert.Equal(t, ReasonCreateRetrying, st.Reason)
	assert.Equal(t, t0.Add(20*time.Second), st.Wake, "looked at again at the timeout at the latest")

	clock.SetTime(t0.Add(20 * time.Second))
	st = e.Look(t.Context(), s)
	require.NoError(t, st.Err)
	assert.True(t, st.Done())
	assert.Equal(t, trainjob.PhaseTimedOut, st.Phase, st.Message)
	assert.Equal(t, trainjob.ClassTimeout, st.Failure.Class)
	assert.Contains(t, st.Message, "timeout of 20s passed before its TrainJob was created")
	assert.Zero(t, trainJobCount(t, c))
}

// A step that follows another's TrainJob (share.go) counts its deadlines from when it began,
// not from the job's creation by the step that made it long before.
func TestAFollowersDeadlinesCountFromItsOwnStart(t *testing.T) {
	e, c := engine(t, nil)
	clock := clocktesting.NewFakePassiveClock(t0)
	e.Clock = clock
	a, b := twoRuns(t)
	made := e.Look(t.Context(), a)
	require.True(t, made.Created, made.Message)

	joined := t0.Add(110 * time.Minute)
	clock.SetTime(joined)
	b.Begun, b.Deadlines = joined, trainjob.Deadlines{Timeout: 2 * time.Hour}
	st := e.Look(t.Context(), b)
	require.Equal(t, ReasonFollowing, st.Reason, st.Message)

	clock.SetTime(joined.Add(15 * time.Minute)) // past the maker's creation + 2h
	b.Recorded = made.Name
	st = e.Look(t.Context(), b)
	require.NoError(t, st.Err)
	assert.False(t, st.Phase.Terminal(), "within its own timeout: %s %s", st.Phase, st.Message)
	assert.Equal(t, joined.Add(2*time.Hour), st.Wake, "its own deadline")
	assert.Equal(t, 1, trainJobCount(t, c))

	clock.SetTime(joined.Add(2 * time.Hour))
	st = e.Look(t.Context(), b)
	assert.Equal(t, trainjob.PhaseTimedOut, st.Phase, st.Message)
	assert.True(t, st.Released, "it lets go; the maker still holds the job: %s", st.Message)
}

// lost-seconds counts every earlier attempt of the step, from when its first began, whether or
// not their TrainJobs are still there: a retry's TrainJob carries the step's first start, and so
// does a face that knows it.
func TestLostCountsEarlierAttemptsWhoseJobsAreGone(t *testing.T) {
	failed := metav1.Condition{Type: trainer.TrainJobFailed, Status: metav1.ConditionTrue, Reason: "FailedJobs", Message: "boom",
		LastTransitionTime: metav1.NewTime(t0.Add(time.Minute))}
	for name, tc := range map[string]struct {
		firstSince string    // the job's annotation
		face       time.Time // Step.FirstSince
		want       string
	}{
		"the job carries the first attempt's start": {firstSince: t0.Add(-10 * time.Minute).Format(time.RFC3339), want: "600"},
		"the face knows it":                         {face: t0.Add(-7 * time.Minute), want: "420"},
		"the earlier of the two":                    {firstSince: t0.Add(-10 * time.Minute).Format(time.RFC3339), face: t0.Add(-12 * time.Minute), want: "720"},
		"neither, and the earlier jobs are gone":    {want: "0"},
	} {
		t.Run(name, func(t *testing.T) {
			id := identity()
			id.Attempt = 1
			tj := &trainer.TrainJob{
				ObjectMeta: metav1.ObjectMeta{Name: id.Name(), Namespace: "ns", Labels: id.Labels(), CreationTimestamp: metav1.NewTime(t0)},
				Status:     trainer.TrainJobStatus{Conditions: []metav1.Condition{failed}},
			}
			if tc.firstSince != "" {
				tj.Annotations = map[string]string{annotationFirstSince: tc.firstSince}
			}
			e, _ := engine(t, nil, tj)
			st := e.Look(t.Context(), Step{Spec: parse(t, validStep), Namespace: "ns", Identity: id, FirstSince: tc.face})
			require.Equal(t, trainjob.PhaseFailed, st.Phase, st.Message)
			assert.Equal(t, tc.want, st.Outputs()[trainjob.OutLost])
		})
	}
}

// Every TrainJob a step creates carries when the step's first attempt began: the face's, an
// earlier attempt's still in the cache, or its own creation; a retry inherits it.
func TestEveryTrainJobCarriesTheStepsFirstStart(t *testing.T) {
	earlier := ownJob()
	earlier.Annotations = map[string]string{annotationFirstSince: t0.Add(-time.Hour).Format(time.RFC3339)}
	for name, tc := range map[string]struct {
		attempt  int
		face     time.Time
		existing []client.Object
		want     time.Time
	}{
		"a first attempt: now": {want: t0.Add(time.Hour)},
		"the face's":           {face: t0.Add(-2 * time.Hour), want: t0.Add(-2 * time.Hour)},
		"an earlier attempt's job still in the cache": {attempt: 1, existing: []client.Object{earlier}, want: t0.Add(-time.Hour)},
	} {
		t.Run(name, func(t *testing.T) {
			e, c := engine(t, nil, tc.existing...)
			id := identity()
			id.Attempt = tc.attempt
			st := e.Look(t.Context(), Step{Spec: parse(t, validStep), Namespace: "ns", Identity: id, FirstSince: tc.face})
			require.True(t, st.Created, st.Message)
			assert.Equal(t, tc.want.UTC().Format(time.RFC3339), job(t, c, st.Name).Annotations[annotationFirstSince])
		})
	}
}

// A step's own retry ends a TrainJob a deadline ended (here its startTimeout) by letting go of
// it when another step of its cache key follows it: the follower trains on with it, instead of
// failing with TrainJobDeleted.
func TestARetryLetsGoOfAJobAnotherStepFollows(t *testing.T) {
	e, c := engine(t, nil)
	clock := clocktesting.NewFakePassiveClock(t0)
	e.Clock = clock
	a, b := twoRuns(t)
	a.Spec = parse(t, cachedStep+"retry: {limit: 2}\nstartTimeout: 5m\n")
	a.Deadlines = trainjob.StepDeadlines(a.Spec)
	made := e.Look(t.Context(), a)
	require.True(t, made.Created, made.Message)
	b.Spec = parse(t, cachedStep+"retry: {limit: 2}\n")
	require.Equal(t, ReasonFollowing, e.Look(t.Context(), b).Reason)

	clock.SetTime(t0.Add(6 * time.Minute))
	a.Recorded = made.Name
	st := e.Look(t.Context(), a)
	require.NoError(t, st.Err)
	require.True(t, st.Created, "the maker retries: %s", st.Message)
	assert.NotEqual(t, made.Name, st.Name)

	old := job(t, c, made.Name)
	assert.Nil(t, old.DeletionTimestamp, "the followed job is not deleted")
	assert.False(t, a.Identity.Holds(old), "the maker let go of it: %v", old.Labels)
	assert.True(t, b.Identity.Holds(old))

	// The follower, with a retry block of its own, still follows it (its record is kept).
	b.Recorded = made.Name
	following := e.Look(t.Context(), b)
	require.NoError(t, following.Err)
	assert.Equal(t, made.Name, following.Name, following.Message)
	assert.False(t, following.Phase.Terminal(), "it trains on: %s %s", following.Phase, following.Message)

	// The retry's next look, the backstop for a failed delete, leaves it to the follower too.
	again := e.Look(t.Context(), a)
	require.NoError(t, again.Err)
	assert.Nil(t, job(t, c, made.Name).DeletionTimestamp)
}

// A follower with a retry block whose followed job someone deleted fails as its record says,
// instead of forgetting the record and training from scratch.
func TestAFollowerWithARetryBlockKeepsItsRecord(t *testing.T) {
	e, c := engine(t, nil)
	a, b := twoRuns(t)
	a.Spec = parse(t, cachedStep+"retry: {limit: 2}\n")
	b.Spec = a.Spec
	made := e.Look(t.Context(), a)
	require.True(t, made.Created, made.Message)
	require.Equal(t, ReasonFollowing, e.Look(t.Context(), b).Reason)
	require.NoError(t, c.Delete(t.Context(), job(t, c, made.Name)))

	b.Recorded = made.Name
	st := e.Look(t.Context(), b)
	assert.False(t, st.Created, "no TrainJob of its own: %s", st.Message)
	assert.Equal(t, ReasonTrainJobDeleted, st.Reason, st.Message)
	assert.Zero(t, trainJobCount(t, c))
}

// A step whose owner reference is not its hold's owner (`executor run`: the step pod owns the
// job, --owner-uid keys the hold) takes that reference off when it lets go of a job others
// follow, so the job does not go with its pod.
func TestReleaseTakesOffTheStepsOwnerReference(t *testing.T) {
	e, c := engine(t, nil)
	a, b := twoRuns(t)
	pod := &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "step-pod", UID: types.UID("pod-uid")}
	b.Identity.Owner = pod
	made := e.Look(t.Context(), a)
	require.True(t, made.Created, made.Message)
	require.Equal(t, ReasonFollowing, e.Look(t.Context(), b).Reason)
	require.Len(t, job(t, c, made.Name).OwnerReferences, 1)

	b.Stop, b.Recorded = true, made.Name
	st := e.Look(t.Context(), b)
	require.NoError(t, st.Err)
	require.True(t, st.Released, st.Message)
	assert.Empty(t, job(t, c, made.Name).OwnerReferences, "the pod's reference is gone")
}

// trimming is a face's cache as the Argo and Tekton faces have it: every TrainJob read through
// it is trimmed (trainjob.TrimTrainJob).
type trimming struct{ client.Reader }

func (r trimming) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := r.Reader.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if tj, ok := obj.(*trainer.TrainJob); ok {
		out, err := trainjob.TrimTrainJob(tj.DeepCopy())
		if err != nil {
			return err
		}
		*tj = *out.(*trainer.TrainJob)
	}
	return nil
}

// A step's own retries read what their TrainJobs carry through the face's trimmed cache: the
// step's timeout bounds every retry from the first one's start (step-since), and lost-seconds
// counts from the step's first attempt (first-since), on the Argo and Tekton faces as on
// `executor run`.
func TestRetriesReadTheirAnnotationsThroughATrimmedCache(t *testing.T) {
	first := retryJob(0, 0, failedAt(50*time.Minute))
	second := replacing(retryJob(1, 50*time.Minute), first)
	second.Annotations[annotationFirstSince] = t0.Format(time.RFC3339)
	e, _ := engine(t, nil, first, second)
	e.Cache = trimming{e.Cache}
	clock := clocktesting.NewFakePassiveClock(t0.Add(61 * time.Minute))
	e.Clock = clock
	s := Step{Spec: parse(t, validStep+"retry: {limit: 2}\n"), Namespace: "ns", Identity: identity(),
		Deadlines: trainjob.Deadlines{Timeout: time.Hour}}
	st := e.Look(t.Context(), s)
	require.NoError(t, st.Err)
	assert.Equal(t, trainjob.PhaseTimedOut, st.Phase, "an hour after the first retry's start: %s", st.Message)
	assert.Equal(t, "3000", st.Outputs()[trainjob.OutLost], "the first TrainJob's 50 minutes")
}

// A cached step's retry whose TrainJob its face's cache does not show yet (the Argo sidecar's
// cache, scoped to its Workflow, lagging behind the retry's create) is found through its hold on
// the apiserver, and bounded as a retry is: its startTimeout counts from its own creation, not
// the step's start, so it is not deleted as not started the moment it is made.
func TestARetryFoundOnTheApiserverKeepsItsOwnStartTimeout(t *testing.T) {
	first := retryJob(0, 0)
	retry := replacing(retryJob(1, 45*time.Minute), first)
	id := identity().AtRetry(0, 1)
	k, v := id.HoldLabel()
	retry.Labels[k], retry.Annotations[stepcache.AnnotationKey] = v, "key"
	e, c := engine(t, nil, retry)
	scheme, err := trainjob.NewScheme()
	require.NoError(t, err)
	e.Cache, e.Scoped = fake.NewClientBuilder().WithScheme(scheme).Build(), true // it lags: empty
	e.Clock = clocktesting.NewFakePassiveClock(t0.Add(46 * time.Minute))
	s := Step{Spec: parse(t, cachedStep+"retry: {limit: 2}\nstartTimeout: 30m\n"), Namespace: "ns", Identity: identity(),
		Deadlines: trainjob.Deadlines{StartTimeout: 30 * time.Minute, Since: t0}, Recorded: retry.Name}

	st := e.Look(t.Context(), s)
	require.NoError(t, st.Err)
	assert.Equal(t, retry.Name, st.Name)
	assert.Equal(t, trainjob.PhasePending, st.Phase, st.Message)
	assert.True(t, t0.Add(75*time.Minute).Equal(st.Wake), "woken at its startTimeout, from its own creation: %s", st.Wake)
	assert.Equal(t, 1, trainJobCount(t, c), "not deleted")
}
