package lifecycle

import (
	"context"
	"fmt"
	"slices"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/stepcache"
	"github.com/trainstep/trainstep/core/trainjob"
)

// In-flight steps of one cache key train once (docs/cache.md). A cached step that misses the
// cache claims its key in the store before it creates its TrainJob; a step of the same key
// (and engine) that finds the claim of one still training holds that step's TrainJob instead
// of making another: a hold label (trainjob.HoldLabel) and, where the face has an owner, an
// owner reference, so the job goes with the last of its owners. Every look finds the held job
// as it finds its own, and follows it to its end; a step that ends early (a stop, its timeout)
// lets go of its hold, and only the last one's end deletes the job.

// ReasonFollowing: the step follows the TrainJob of another step with the same cache key.
const ReasonFollowing = "FollowingTrainJob"

// claimWithin is how long a claim may name a TrainJob that does not exist yet before another
// step of its key takes the key over: its step is between the claim and the create, which
// takes a request; a step that died there is not coming back.
const claimWithin = time.Minute

// claimRecheck is how soon a step waiting for a claimed TrainJob to appear looks again. Nothing
// it watches would wake it (the job is another step's, under a name no face's watch follows),
// and the wait lasts one create: only the race of two steps starting together waits at all.
const claimRecheck = time.Second

// join is the look at a cached step that missed the cache: the step claims its key, or holds
// the TrainJob of the step that claimed it first. ok is false when the step trains itself: the
// claim is its own, the store could not be written (a warning: the step trains as if it had no
// cache block), or its owner already holds that job for another of its steps.
func (e *Engine) join(ctx context.Context, s Step, key string) (Status, bool) {
	mine := stepcache.Claim{TrainJob: s.Identity.Name(), Claimed: e.now()}
	var claimed *trainer.TrainJob
	stale := func(ctx context.Context, c stepcache.Claim) (bool, error) {
		tj, gone, err := e.claimStale(ctx, s, c)
		claimed = tj
		return gone, err
	}
	claim, err := e.cache().Claim(ctx, s.Namespace, s.Identity.Engine, key, mine, stale)
	if err != nil {
		e.warn(ctx, "the step cache could not be claimed, so the step trains without looking for another step of its key", err)
		return Status{}, false
	}
	if claim.TrainJob == mine.TrainJob {
		return Status{}, false
	}
	if claimed == nil {
		msg := fmt.Sprintf("waiting for TrainJob %s, which a step with the same cache key is creating", claim.TrainJob)
		return Status{Observation: trainjob.Observation{Namespace: s.Namespace, Phase: trainjob.PhasePending, Reason: ReasonFollowing,
			Message: msg, CacheKey: key}, Wake: e.now().Add(claimRecheck)}, true
	}
	st, ok := e.hold(ctx, s, claimed, key)
	if ok && st.Err == nil && trainjob.Observe(claimed, nil).Phase == trainjob.PhaseSucceeded {
		// A success its own step has not stored yet (that step's next look has not come): held
		// like a job still training, and followed to its end now, in this look, since no change
		// of the job is left to wake the step: its outputs, stored for the steps after.
		return e.store(ctx, s, claimed, e.follow(ctx, s, claimed)), true
	}
	return st, ok
}

// claimStale reads the claimed TrainJob (nil when it does not exist) and says whether the claim
// no longer stands: the job failed, is being deleted, succeeded longer ago than the step's
// maxAge, or was never made.
func (e *Engine) claimStale(ctx context.Context, s Step, c stepcache.Claim) (*trainer.TrainJob, bool, error) {
	tj := &trainer.TrainJob{}
	err := e.API.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: c.TrainJob}, tj)
	switch {
	case apierrors.IsNotFound(err):
		return nil, e.now().Sub(c.Claimed) > claimWithin, nil
	case err != nil:
		return nil, false, fmt.Errorf("reading TrainJob %s/%s, which claims the step's cache key: %w", s.Namespace, c.TrainJob, err)
	}
	// A claim stands while its job trains, and after it succeeds until its step stores the
	// success (which ends the claim): a step between the two is served from the job as from the
	// store, within its maxAge counted from the success. A failure is never followed.
	obs := trainjob.Observe(tj, nil)
	switch {
	case tj.DeletionTimestamp != nil:
		return tj, true, nil
	case obs.Phase == trainjob.PhaseSucceeded:
		return tj, obs.CompletionTime == nil || e.now().Sub(*obs.CompletionTime) > s.Spec.Cache.MaxAge.Duration, nil
	}
	return tj, obs.Phase.Terminal(), nil
}

// hold makes the step one of tj's holders and says it follows it.
func (e *Engine) hold(ctx context.Context, s Step, tj *trainer.TrainJob, key string) (Status, bool) {
	k, v := s.Identity.HoldLabel()
	if have, ok := tj.Labels[k]; ok && have != v {
		return Status{}, false // one hold per owner: the owner's second step of the key trains itself
	}
	if !s.Identity.Holds(tj) {
		patch := client.MergeFromWithOptions(tj.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if tj.Labels == nil {
			tj.Labels = map[string]string{}
		}
		tj.Labels[k] = v
		if o := s.Identity.Owner; o != nil && !slices.ContainsFunc(tj.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == o.UID }) {
			// Not the controller (the step that made the job is), and not blocking its owner's
			// deletion: an owner among others, so the job goes with the last of them.
			ref := *o
			ref.Controller, ref.BlockOwnerDeletion = nil, nil
			tj.OwnerReferences = append(tj.OwnerReferences, ref)
		}
		if err := e.Writer.Patch(ctx, tj, patch); err != nil {
			// No name in the status: the job is not the step's until its hold is on it, and a
			// face that recorded it would look for it as its own and never join again (a
			// Conflict is common here: the job's maker records its start at about this time).
			return retrying(s, "", ReasonFollowing, fmt.Sprintf("holding TrainJob %s, which a step with the same cache key started,", tj.Name), err), true
		}
	}
	msg := followingNote(tj.Name)
	return Status{Observation: trainjob.Observation{Namespace: s.Namespace, Name: tj.Name, Phase: trainjob.PhasePending,
		Reason: ReasonFollowing, Message: msg, CacheKey: key}, Wake: e.deadline(s)}, true
}

// held is the TrainJob the step holds, nil when none: the one its face recorded, or else, for
// a cached step, the one that carries its hold, from the face's cache and, when the face caches
// only its own jobs (Cluster.Scoped), from the apiserver.
func (e *Engine) held(ctx context.Context, s Step) (*trainer.TrainJob, error) {
	if s.Recorded != "" && s.Recorded != s.Identity.Name() {
		tj := &trainer.TrainJob{}
		err := e.Cache.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Recorded}, tj, e.cacheGet()...)
		switch {
		case err == nil && s.Identity.Holds(tj):
			return tj, nil
		case err != nil && !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("reading TrainJob %s/%s: %w", s.Namespace, s.Recorded, err)
		}
	}
	if s.Spec == nil || s.Spec.Cache == nil {
		return nil, nil
	}
	k, v := s.Identity.HoldLabel()
	readers := []client.Reader{e.Cache}
	if e.Scoped {
		readers = append(readers, e.API)
	}
	for _, r := range readers {
		l := &trainer.TrainJobList{}
		if err := r.List(ctx, l, client.InNamespace(s.Namespace), client.MatchingLabels{k: v}); err != nil {
			return nil, fmt.Errorf("looking up the TrainJob step %s follows: %w", s.Identity.StepKey, err)
		}
		if len(l.Items) > 0 {
			return &l.Items[0], nil
		}
	}
	return nil, nil
}

// release lets go of ownerUID's hold on a shared TrainJob: the job is deleted when no other
// step holds it, and otherwise left running for them, the owner's hold and owner reference
// taken off (the reference whose UID is ownerUID, or one of refs: `executor run`'s owner is its
// step pod, not the run whose UID keys its hold). Both writes are preconditioned on the version
// read, so a hold added since is a Conflict (the caller reads again) rather than a job deleted
// under a step that just joined. left is how many other steps' holds remain.
func release(ctx context.Context, w client.Writer, tj *trainer.TrainJob, ownerUID string, refs ...types.UID) (deleted bool, left int, err error) {
	left = trainjob.OtherHolders(tj, ownerUID)
	if left == 0 {
		uid, rv := tj.UID, tj.ResourceVersion
		err = w.Delete(ctx, &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: tj.Namespace, Name: tj.Name}},
			client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &uid, ResourceVersion: &rv})
		switch {
		case err == nil:
			return true, 0, nil
		case apierrors.IsNotFound(err):
			return false, 0, nil
		}
		return false, 0, fmt.Errorf("deleting TrainJob %s/%s: %w", tj.Namespace, tj.Name, err)
	}
	mine := tj.DeepCopy()
	patch := client.MergeFromWithOptions(tj.DeepCopy(), client.MergeFromWithOptimisticLock{})
	delete(mine.Labels, trainjob.HoldKey(ownerUID))
	// Its controller reference too, when the step that made the job lets go: the job must not go
	// with that owner while others follow it.
	mine.OwnerReferences = slices.DeleteFunc(mine.OwnerReferences, func(r metav1.OwnerReference) bool {
		return string(r.UID) == ownerUID || slices.Contains(refs, r.UID)
	})
	if err := w.Patch(ctx, mine, patch); err != nil && !apierrors.IsNotFound(err) {
		return false, left, fmt.Errorf("letting go of TrainJob %s/%s, which %d other step(s) follow: %w", tj.Namespace, tj.Name, left, err)
	}
	return false, left, nil
}

// ownerRef is the UID of the step's owner reference, when it has one: release takes it off.
func ownerRef(id trainjob.Identity) []types.UID {
	if id.Owner == nil {
		return nil
	}
	return []types.UID{id.Owner.UID}
}

// followingNote begins every message of a step that follows another's TrainJob while it runs.
func followingNote(name string) string {
	return fmt.Sprintf("following TrainJob %s: a step with the same cache key started it, and it trains once for both", name)
}

// releasedNote says what a step that let go of a shared TrainJob left behind.
func releasedNote(name string, left int) string {
	return fmt.Sprintf("; TrainJob %s was left running: %d other step(s) with the same cache key follow it", name, left)
}
