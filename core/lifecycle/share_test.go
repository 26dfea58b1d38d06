package lifecycle

import (
	"context"
	"errors"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/trainstep/trainstep/core/stepcache"
	"github.com/trainstep/trainstep/core/trainjob"
)

// twoRuns are the same cached step in two runs: a made first, b starts while a trains.
func twoRuns(t *testing.T) (a, b Step) {
	a = Step{Spec: parse(t, cachedStep), Namespace: "ns", Identity: identity()}
	b = a
	b.Identity.OwnerUID = "uid-2"
	b.Identity.Owner = &metav1.OwnerReference{APIVersion: "tekton.dev/v1beta1", Kind: "CustomRun", Name: "run-2", UID: types.UID("uid-2"),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	return a, b
}

func job(t *testing.T, c client.Client, name string) *trainer.TrainJob {
	t.Helper()
	tj := &trainer.TrainJob{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: name}, tj))
	return tj
}

func setCondition(t *testing.T, c client.Client, name, kind, reason string) {
	t.Helper()
	tj := job(t, c, name)
	meta.SetStatusCondition(&tj.Status.Conditions, metav1.Condition{Type: kind, Status: metav1.ConditionTrue, Reason: reason, Message: reason})
	require.NoError(t, c.Update(t.Context(), tj))
}

// A cached step that starts while another of its key trains follows that step's TrainJob: one
// job trains, both end with its outputs, the follower's a hit that names it.
func TestInFlightStepsOfOneKeyTrainOnce(t *testing.T) {
	e, c := engine(t, nil)
	a, b := twoRuns(t)
	made := e.Look(t.Context(), a)
	require.True(t, made.Created, made.Message)

	following := e.Look(t.Context(), b)
	assert.False(t, following.Created)
	assert.Equal(t, ReasonFollowing, following.Reason)
	assert.Equal(t, made.Name, following.Name)
	assert.Contains(t, following.Message, "following TrainJob "+made.Name)
	assert.Equal(t, 1, trainJobCount(t, c), "one TrainJob for both")
	tj := job(t, c, made.Name)
	assert.True(t, a.Identity.Holds(tj) && b.Identity.Holds(tj), "both hold it: %v", tj.Labels)
	require.Len(t, tj.OwnerReferences, 1, "the follower owns it too, as an owner among others")
	assert.Equal(t, types.UID("uid-2"), tj.OwnerReferences[0].UID)
	assert.Nil(t, tj.OwnerReferences[0].Controller)
	later := e.Look(t.Context(), b)
	assert.Equal(t, made.Name, later.Name, "a later look finds the job it follows")
	assert.Contains(t, later.Message, "following TrainJob "+made.Name+": ", "and says whose it is")

	setCondition(t, c, made.Name, trainer.TrainJobComplete, "JobsCompleted")
	mine, theirs := e.Look(t.Context(), a), e.Look(t.Context(), b)
	require.Equal(t, trainjob.PhaseSucceeded, mine.Phase, mine.Message)
	require.Equal(t, trainjob.PhaseSucceeded, theirs.Phase, theirs.Message)
	assert.Equal(t, "false", mine.Outputs()[trainjob.OutCacheHit])
	out := theirs.Outputs()
	assert.Equal(t, "true", out[trainjob.OutCacheHit])
	assert.Equal(t, made.Name, out[trainjob.OutCachedFrom])
	assert.Equal(t, made.Name, out[trainjob.OutName], "the follower's outputs are the job's own")
	assert.Equal(t, mine.CacheKey, theirs.CacheKey)
	entry, err := e.cache().Get(t.Context(), "ns", mine.CacheKey)
	require.NoError(t, err)
	require.NotNil(t, entry)
	assert.Equal(t, made.Name, entry.TrainJob)
}

// A step that ends early (stopped, past its timeout) lets go of a job others follow, which
// runs on for them; the last one's end deletes it.
func TestASharedJobGoesWithTheLastOfItsSteps(t *testing.T) {
	for name, tc := range map[string]struct {
		first func(a, b Step) (Step, Step) // which stops first
	}{
		"the maker stops first":    {first: func(a, b Step) (Step, Step) { return a, b }},
		"the follower stops first": {first: func(a, b Step) (Step, Step) { return b, a }},
	} {
		t.Run(name, func(t *testing.T) {
			e, c := engine(t, nil)
			a, b := twoRuns(t)
			made := e.Look(t.Context(), a)
			require.True(t, made.Created)
			require.Equal(t, ReasonFollowing, e.Look(t.Context(), b).Reason)
			one, other := tc.first(a, b)

			one.Stop, one.Recorded = true, made.Name
			st := e.Look(t.Context(), one)
			require.NoError(t, st.Err)
			assert.True(t, st.Stopped)
			assert.True(t, st.Released, st.Message)
			assert.False(t, st.Deleted)
			assert.Contains(t, st.Message, "TrainJob "+made.Name+" was left running: 1 other step(s) with the same cache key follow it")
			tj := job(t, c, made.Name)
			assert.False(t, one.Identity.Holds(tj), "its hold is gone")
			assert.True(t, other.Identity.Holds(tj))
			for _, ref := range tj.OwnerReferences {
				assert.NotEqual(t, types.UID(one.Identity.OwnerUID), ref.UID, "its owner reference is gone")
			}
			assert.Equal(t, made.Name, e.Look(t.Context(), other).Name, "the other still follows it")

			other.Stop, other.Recorded = true, made.Name
			st = e.Look(t.Context(), other)
			require.NoError(t, st.Err)
			assert.True(t, st.Deleted, st.Message)
			assert.Zero(t, trainJobCount(t, c), "the last one's stop deletes it")
		})
	}
	t.Run("the maker's timeout", func(t *testing.T) {
		e, c := engine(t, nil)
		a, b := twoRuns(t)
		require.True(t, e.Look(t.Context(), a).Created)
		require.Equal(t, ReasonFollowing, e.Look(t.Context(), b).Reason)
		a.Deadlines = trainjob.Deadlines{Timeout: time.Minute, Since: t0}
		st := e.Look(t.Context(), a)
		require.Equal(t, trainjob.PhaseTimedOut, st.Phase, st.Message)
		assert.True(t, st.Released)
		assert.Contains(t, st.Message, "was left running: 1 other step(s)")
		assert.Equal(t, trainjob.PhasePending, e.Look(t.Context(), b).Phase, "the follower trains on")
		assert.Equal(t, 1, trainJobCount(t, c))
	})
}

// A claim whose TrainJob failed, or was never made within claimWithin, no longer stands: the
// next step of the key trains itself. A claimed job not made yet is waited for.
func TestAStaleClaimIsTakenOver(t *testing.T) {
	t.Run("its job failed", func(t *testing.T) {
		e, c := engine(t, nil)
		a, b := twoRuns(t)
		made := e.Look(t.Context(), a)
		setCondition(t, c, made.Name, trainer.TrainJobFailed, "FailedJobs")
		st := e.Look(t.Context(), b)
		assert.True(t, st.Created, st.Message)
		assert.NotEqual(t, made.Name, st.Name)
	})
	t.Run("its job never came", func(t *testing.T) {
		e, c := engine(t, nil)
		clock := clocktesting.NewFakeClock(t0)
		e.Clock = clock
		_, b := twoRuns(t)
		ckey := lookKey(t, e, b)
		_, err := e.cache().Claim(t.Context(), "ns", b.Identity.Engine, ckey, stepcache.Claim{TrainJob: "elsewhere-123", Claimed: t0}, nil)
		require.NoError(t, err)
		st := e.Look(t.Context(), b)
		assert.False(t, st.Created)
		assert.Equal(t, ReasonFollowing, st.Reason)
		assert.Contains(t, st.Message, "waiting for TrainJob elsewhere-123")
		assert.Equal(t, t0.Add(claimRecheck), st.Wake, "looked at again soon: nothing watched wakes it")
		assert.Zero(t, trainJobCount(t, c))
		clock.Step(claimWithin + time.Second)
		st = e.Look(t.Context(), b)
		assert.True(t, st.Created, st.Message)
	})
}

// complete marks the TrainJob name succeeded at when.
func complete(t *testing.T, c client.Client, name string, when time.Time) {
	t.Helper()
	tj := job(t, c, name)
	meta.SetStatusCondition(&tj.Status.Conditions, metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue,
		Reason: "JobsCompleted", Message: "jobset completed", LastTransitionTime: metav1.NewTime(when)})
	require.NoError(t, c.Update(t.Context(), tj))
}

// A claimed TrainJob that succeeded before its step stored it (that step's next look has not
// come: an Argo call waiting for its requeue, a face restarting) is a hit: the next step of the
// key holds it and is served its outputs in the same look, stores them, and trains nothing; a
// look again (a replayed call) answers the same. A success older than the step's maxAge is no
// hit: that step trains.
func TestAClaimedSuccessNotYetStoredIsServed(t *testing.T) {
	t.Run("within maxAge", func(t *testing.T) {
		e, c := engine(t, nil)
		a, b := twoRuns(t)
		made := e.Look(t.Context(), a)
		require.True(t, made.Created, made.Message)
		complete(t, c, made.Name, e.now().Add(-time.Minute))
		entry, err := e.cache().Get(t.Context(), "ns", made.CacheKey)
		require.NoError(t, err)
		require.Nil(t, entry, "its step has not looked since: nothing stored")

		st := e.Look(t.Context(), b)
		require.True(t, st.Done(), st.Message)
		assert.Equal(t, trainjob.PhaseSucceeded, st.Phase, st.Message)
		assert.False(t, st.Created)
		assert.Equal(t, 1, trainJobCount(t, c), "served: no second TrainJob")
		out := st.Outputs()
		assert.Equal(t, "true", out[trainjob.OutCacheHit])
		assert.Equal(t, made.Name, out[trainjob.OutCachedFrom])
		assert.Equal(t, made.Name, out[trainjob.OutName], "the job's own outputs")
		assert.Equal(t, made.CacheKey, out[trainjob.OutCacheKey])
		assert.True(t, b.Identity.Holds(job(t, c, made.Name)), "held, as a job it follows")
		entry, err = e.cache().Get(t.Context(), "ns", made.CacheKey)
		require.NoError(t, err)
		require.NotNil(t, entry, "stored for the steps after")
		assert.Equal(t, made.Name, entry.TrainJob)

		b.Recorded = st.Name // as a face records it
		again := e.Look(t.Context(), b)
		assert.Equal(t, trainjob.PhaseSucceeded, again.Phase, again.Message)
		assert.Equal(t, out, again.Outputs(), "a replayed look answers the same")
	})
	t.Run("past maxAge", func(t *testing.T) {
		e, c := engine(t, nil)
		a, b := twoRuns(t)
		made := e.Look(t.Context(), a)
		require.True(t, made.Created, made.Message)
		complete(t, c, made.Name, e.now().Add(-25*time.Hour))
		st := e.Look(t.Context(), b)
		assert.True(t, st.Created, st.Message)
		assert.NotEqual(t, made.Name, st.Name)
	})
}

// lookKey is the step's cache key, as a look that trains it computes it.
func lookKey(t *testing.T, e *Engine, s Step) string {
	t.Helper()
	plan, err := e.Planner.Plan(t.Context(), s.Spec, s.Namespace)
	require.NoError(t, err)
	k, err := cacheKey(s, plan)
	require.NoError(t, err)
	return k
}

// A hold that conflicts (the job's maker wrote it since it was read: it records its start about
// then) names no job, so a face records nothing and its next look joins again and holds it.
func TestAHoldThatConflictsJoinsAgain(t *testing.T) {
	e, c := engine(t, nil)
	a, b := twoRuns(t)
	made := e.Look(t.Context(), a)
	require.True(t, made.Created, made.Message)

	conflicts := 1
	e.Writer = interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if conflicts > 0 {
				conflicts--
				return apierrors.NewConflict(trainer.GroupVersion.WithResource("trainjobs").GroupResource(), obj.GetName(), errors.New("changed"))
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	refused := e.Look(t.Context(), b)
	require.Error(t, refused.Err)
	assert.Empty(t, refused.Name, "a job not yet held is not the step's to record")
	assert.False(t, b.Identity.Holds(job(t, c, made.Name)))

	b.Recorded = refused.Name // as a face records it
	again := e.Look(t.Context(), b)
	require.NoError(t, again.Err)
	assert.Equal(t, made.Name, again.Name)
	assert.Contains(t, again.Message, "following TrainJob "+made.Name)
	assert.True(t, b.Identity.Holds(job(t, c, made.Name)), "the second look holds it")
	assert.Equal(t, 1, trainJobCount(t, c), "one TrainJob for both")
}

// A hold is one per owner: a second step of the same run and key trains itself rather than
// leave two holds under one label.
func TestOneHoldPerOwner(t *testing.T) {
	e, c := engine(t, nil)
	a, b := twoRuns(t)
	require.True(t, e.Look(t.Context(), a).Created)
	require.Equal(t, ReasonFollowing, e.Look(t.Context(), b).Reason)
	sibling := b
	sibling.Identity.StepKey = "train-again"
	st := e.Look(t.Context(), sibling)
	assert.True(t, st.Created, st.Message)
	assert.Equal(t, 2, trainJobCount(t, c))
}

// A shared job's stop that raced a hold (the job changed since read) deletes nothing.
func TestReleaseIsPreconditioned(t *testing.T) {
	_, c := engine(t, nil)
	a, b := twoRuns(t)
	tj := ownJob()
	k, v := a.Identity.HoldLabel()
	tj.Labels[k] = v
	require.NoError(t, c.Create(t.Context(), tj))
	read := job(t, c, tj.Name)
	joined := read.DeepCopy()
	bk, bv := b.Identity.HoldLabel()
	joined.Labels[bk] = bv
	require.NoError(t, c.Update(t.Context(), joined))
	deleted, _, err := release(t.Context(), c, read, a.Identity.OwnerUID)
	require.Error(t, err)
	assert.True(t, apierrors.IsConflict(err), "got %v", err)
	assert.False(t, deleted)
	assert.Equal(t, 1, trainJobCount(t, c))
}
