package lifecycle

import (
	"context"
	"fmt"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
)

// This file is the step's own retry (step.Retry): a TrainJob that fails for a retryable cause is
// followed by a new one, which resumes from the step's checkpoint, until retry.limit is spent.
//
// Each of the face's attempts (Identity.Attempt: Argo's {{retries}}, a CustomRun's retries,
// --attempt) owns retry.limit+1 TrainJob attempts: attempt a's own retry i is attempt
// a*(limit+1)+i. Without a retry block that is a itself, so names, labels and checkpoints are what
// they were. Which of them is the step's now is read from the cluster at every look (the newest
// that exists, or that the face recorded), so the engine stays level-triggered: a restarted
// face, another replica or a replayed call finds the same one.

// Reasons of a step between its own retries.
const (
	// ReasonRetrying: the step's TrainJob failed for a retryable cause and the next one is
	// created when its backoff ends.
	ReasonRetrying = "Retrying"
)

// Annotations a retry's TrainJob carries.
const (
	// annotationRetryOf names the TrainJob a retry replaces, for whoever reads the job (a
	// retry's own is named by the step's identity: one that a deadline ended but that may still
	// run is deleted by the step's later looks if the retry's own look could not).
	annotationRetryOf = "trainstep.dev/retry-of"
	// annotationStepSince is when the step's first TrainJob of the face's attempt began (or
	// Deadlines.Since): the step's timeout bounds all its retries together.
	annotationStepSince = "trainstep.dev/step-since"
	// annotationFirstSince, on every TrainJob a step creates, is when the step's first attempt
	// began: the face's (Step.FirstSince), else inherited from the job a retry replaces or an
	// earlier attempt's job, else the job's own creation. lost-seconds counts from it, so an
	// earlier attempt's time is counted even after its TrainJob is gone.
	annotationFirstSince = "trainstep.dev/first-since"
)

// retries is the step's retry.limit: 0 when it does not retry itself. A stop counts them too: it
// ends whichever TrainJob is the step's now, found the same way.
func retries(s Step) int {
	return s.Spec.RetryLimit()
}

// inner is the step at its own retry i of the face's attempt (s.faceAttempt).
func inner(s Step, i int) Step {
	s.Identity = s.Identity.AtRetry(s.faceAttempt, s.faceAttempt*(retries(s)+1)+i)
	return s
}

// retryIndex is which of the face attempt's own retries s is at.
func retryIndex(s Step) int {
	return s.Identity.Attempt - s.faceAttempt*(retries(s)+1)
}

// current is the step at the retry it is at now, and that retry's TrainJob (nil when the cache
// has none): the newest retry whose job the cache holds, or the one the face recorded when that
// is newer (the cache lags, or someone deleted it). found is what the face's own Find returned
// for s.Identity; a step without a retry block is returned as it is. s.Identity.Attempt is the
// face's attempt in, the TrainJob's out.
func (e *Engine) current(ctx context.Context, s Step, found *trainer.TrainJob) (Step, *trainer.TrainJob, error) {
	limit := retries(s)
	if limit == 0 {
		return s, found, nil
	}
	recorded := -1
	for i := limit; i >= 0; i-- {
		at := inner(s, i)
		if s.Recorded != "" && s.Recorded == at.Identity.Name() {
			recorded = i
		}
		tj, err := e.findRetry(ctx, at, i)
		if err != nil {
			return s, nil, err
		}
		if tj != nil || recorded == i {
			if recorded != i {
				at.Recorded = "" // the face's record names another retry's job
			}
			return sinceOfRetry(at, i, tj), tj, nil
		}
	}
	// No retry of the attempt has a job: the face's record, when it has one, names a job the
	// step follows (share.go), which held() reads, or one someone deleted (recorded()).
	return inner(s, 0), nil, nil
}

// findRetry reads retry i's TrainJob: the first by Find (an earlier release may have made it
// under another name), the later ones by name alone (only this release makes them).
func (e *Engine) findRetry(ctx context.Context, at Step, i int) (*trainer.TrainJob, error) {
	if i == 0 {
		return e.Find(ctx, at.Namespace, at.Identity)
	}
	tj := &trainer.TrainJob{}
	err := e.Cache.Get(ctx, client.ObjectKey{Namespace: at.Namespace, Name: at.Identity.Name()}, tj, e.cacheGet()...)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading TrainJob %s/%s: %w", at.Namespace, at.Identity.Name(), err)
	}
	return tj, nil
}

// sinceOfRetry bounds a retry's TrainJob: the step's timeout from when its first began (the
// retry's annotation), its startTimeout from the retry's own creation.
func sinceOfRetry(s Step, i int, tj *trainer.TrainJob) Step {
	if i == 0 || tj == nil {
		return s
	}
	if since, err := time.Parse(time.RFC3339, tj.Annotations[annotationStepSince]); err == nil && s.Deadlines.Since.IsZero() {
		s.Deadlines.Since = since
	}
	s.Deadlines.StartSince = tj.CreationTimestamp.Time
	return s
}

// retry carries out a terminal verdict on the step's own TrainJob when the step retries it: the
// next TrainJob once the backoff ends (at once after a deadline trainstep ended it at), and the
// failed one deleted when a deadline asks for it. ok is false when it is not retried (not
// retryable, no retries left, no time left, a job it only follows): conclude it as it ended.
func (e *Engine) retry(ctx context.Context, s Step, tj *trainer.TrainJob, v trainjob.Verdict) (Status, bool) {
	limit, i := retries(s), retryIndex(s)
	f := v.Failure
	if f == nil {
		f = reasonFailure(v.Reason)
	}
	if limit == 0 || i >= limit || v.Phase != trainjob.PhaseFailed || !f.Retryable || !s.Identity.Adopts(tj) {
		return Status{}, false
	}
	since, now := stepSince(s, tj), e.now()
	at := now
	if b := s.Spec.Retry.Backoff; b != nil && !v.Delete && v.CompletionTime != nil {
		at = v.CompletionTime.Add(b.Duration)
	}
	if d := s.Deadlines.Timeout; d > 0 && (!at.Before(since.Add(d)) || !now.Before(since.Add(d))) {
		// The step's time is up before a retry could start: its backoff ends after the timeout,
		// or the face looks only after it (a face that was down), when a retry would be made
		// past the timeout and deleted at its first look.
		return Status{}, false
	}
	obs := e.tails().WithTail(ctx, e.tailer(), v) // read once: looked at again until the backoff ends
	obs.Failure = f
	why := fmt.Sprintf("TrainJob %s failed (%s)", tj.Name, f.Class)
	if now.Before(at) {
		obs.Phase, obs.Reason = trainjob.PhasePending, ReasonRetrying
		obs.Message = fmt.Sprintf("%s; trainstep retries it at %s (retry %d of %d): %s", why, at.UTC().Format(time.RFC3339), i+1, limit, obs.Message)
		obs.CompletionTime = nil
		return Status{Observation: obs, Trouble: true, Wake: earliest(at, e.deadline(s))}, true
	}
	next := inner(s, i+1)
	next.Recorded, next.retryOf, next.stepSince, next.firstSince = "", tj.Name, since, firstSinceOf(tj)
	st := e.submit(ctx, next)
	switch {
	case st.Err != nil:
		return st, true // trouble that may pass: the next look decides the same again
	case st.Name == "" || st.Invalid != nil:
		// Refused for good (no right to create it, the apiserver refuses it): the step ends as
		// its job did, and says why it was not retried.
		end := e.conclude(ctx, s, tj, v)
		end.Message += "; trainstep could not retry it: " + st.Message
		return end, true
	}
	if v.Delete {
		if err := e.endReplaced(ctx, s, tj); err != nil && e.Warn != nil {
			e.Warn(ctx, "deleting a TrainJob a deadline ended failed; its retry deletes it at its next look", err)
		}
	}
	st.Trouble = true
	st.Message = fmt.Sprintf("%s: %s; retried as TrainJob %s (retry %d of %d)", why, obs.Message, st.Name, i+1, limit)
	return st, true
}

// stepSince is when the step's deadlines count from across its retries: the face's Since, else
// when its first TrainJob began (or the face began the attempt, when that is earlier).
func stepSince(s Step, tj *trainer.TrainJob) time.Time {
	if d := deadlinesFor(s, tj); !d.Since.IsZero() {
		return d.Since
	}
	return tj.CreationTimestamp.Time
}

// markRetry stamps a retry's TrainJob with the job it replaces and the step's start, and every
// TrainJob with when the step's first attempt began (first).
func markRetry(obj client.Object, s Step, first time.Time) {
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[annotationFirstSince] = first.UTC().Format(time.RFC3339)
	if s.retryOf != "" {
		annotations[annotationRetryOf] = s.retryOf
		annotations[annotationStepSince] = s.stepSince.UTC().Format(time.RFC3339)
	}
	obj.SetAnnotations(annotations)
}

// endEarlierRetries ends what the step's earlier retries left running: the TrainJob of a retry
// that a deadline ended and whose delete failed (retry) is deleted, or let go of, at every look
// of the step at a later retry, whatever that look does (follows the retry's job, stops the step,
// finds the retry's job deleted), until it is gone; and so is each before it, should a delete
// have failed at two retries in a row. One cache read per earlier retry, newest first; nothing
// (not even a name's hash) for a step at its first TrainJob: it runs on every look of every step.
// The error is a delete that failed and may pass, which a look that ends the step must not
// leave behind: its face looks no more. One the apiserver forbids is only said (Warn).
func (e *Engine) endEarlierRetries(ctx context.Context, s Step) error {
	var failed error
	for i := retryIndex(s) - 1; i >= 0; i-- {
		prev := inner(s, i)
		old := &trainer.TrainJob{}
		if err := e.Cache.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: prev.Identity.Name()}, old, e.cacheGet()...); err != nil {
			continue
		}
		if !leftRunning(prev.Identity, old) {
			continue
		}
		err := e.endReplaced(ctx, prev, old)
		if err != nil && e.Warn != nil {
			e.Warn(ctx, "deleting the TrainJob a retry replaced failed; tried again at the next look", err)
		}
		if err != nil && !apierrors.IsForbidden(err) && failed == nil {
			failed = fmt.Errorf("ending TrainJob %s, which a retry replaced: %w", old.Name, err)
		}
	}
	return failed
}

// leftRunning says an earlier retry's TrainJob is still the step's to end: it has not ended, is
// not being deleted, was not kept, and was not let go of already (it runs on for the steps of
// its cache key that follow it).
func leftRunning(prev trainjob.Identity, old *trainer.TrainJob) bool {
	switch {
	case old.DeletionTimestamp != nil, !prev.Adopts(old), trainjob.Kept(old), trainjob.Observe(old, nil).Phase.Terminal():
		return false
	}
	return len(trainjob.Holders(old)) == 0 || prev.Holds(old)
}

// endReplaced ends a TrainJob a deadline ended and a retry replaces: it is deleted, or, when
// other steps of its cache key follow it, let go of (share.go): it runs on for them, and their
// own deadlines decide its end.
func (e *Engine) endReplaced(ctx context.Context, s Step, tj *trainer.TrainJob) error {
	if len(trainjob.Holders(tj)) == 0 {
		return trainjob.Delete(ctx, e.Writer, tj.Namespace, tj.Name)
	}
	_, _, err := release(ctx, e.Writer, tj, s.Identity.OwnerUID, ownerRef(s.Identity)...)
	return err
}

// firstSinceOf is when the step of tj began its first attempt, as tj carries it
// (annotationFirstSince), else tj's creation (a job an earlier release made).
func firstSinceOf(tj *trainer.TrainJob) time.Time {
	if at, err := time.Parse(time.RFC3339, tj.Annotations[annotationFirstSince]); err == nil && at.Before(tj.CreationTimestamp.Time) {
		return at
	}
	return tj.CreationTimestamp.Time
}

// TrainJobNames are the names of the TrainJobs the face's attempt of s may have, newest first:
// one without a retry block, one per retry with it. A face that records what it created by name
// (Argo's node outputs) finds its record among them.
func TrainJobNames(s Step) []string {
	s.faceAttempt = s.Identity.Attempt
	names := make([]string, 0, retries(s)+1)
	for i := retries(s); i >= 0; i-- {
		at := inner(s, i)
		names = append(names, at.Identity.Name())
	}
	return names
}
