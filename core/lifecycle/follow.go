package lifecycle

import (
	"context"
	"fmt"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
)

// follow is the look at a step whose TrainJob exists: the core's verdict on what the caches
// show, carried out (the start recorded, the job deleted or kept at a deadline, the failing
// pod's log read).
func (e *Engine) follow(ctx context.Context, s Step, tj *trainer.TrainJob) Status {
	v, err := e.decide(ctx, s, tj)
	if err != nil {
		return Status{Err: err, Observation: trainjob.Observation{Namespace: tj.Namespace, Name: tj.Name}}
	}
	e.markStarted(ctx, tj, v)
	if v.Phase.Terminal() {
		if st, ok := e.retry(ctx, s, tj, v); ok {
			return st
		}
		return e.conclude(ctx, s, tj, v)
	}
	obs := v.Observation
	if v.TailPod != "" {
		// A node its Job retries: say why now, with its log (read once per failed pod).
		obs = e.tails().WithTail(ctx, e.tailer(), v)
	}
	return Status{Observation: obs, Trouble: v.Trouble, Wake: v.Wake}
}

// decide is the core's verdict on the TrainJob as the caches show it; before a verdict that rests
// on the pods (a return value, a startTimeout) a face whose cache may miss an older job's pods
// reads them from the apiserver.
func (e *Engine) decide(ctx context.Context, s Step, tj *trainer.TrainJob) (trainjob.Verdict, error) {
	snap, err := e.Snapshot(ctx, tj)
	if err != nil {
		return trainjob.Verdict{}, err
	}
	snap.Now = e.now()
	d := deadlinesFor(s, tj)
	v := trainjob.Decide(snap, d)
	if len(snap.Pods) == 0 && (v.Phase == trainjob.PhaseSucceeded || v.Reason == trainjob.ReasonStartTimeout) {
		pods, err := e.podsBeforeVerdict(ctx, s, tj)
		if err != nil {
			return trainjob.Verdict{}, err
		}
		if len(pods) > 0 {
			snap.Pods = pods
			v = trainjob.Decide(snap, d)
		}
	}
	return v, nil
}

// podsBeforeVerdict lists the pods of a job whose snapshot shows none, before a verdict that
// rests on them: with the face's PodsBeforeVerdict, or from the apiserver for a job the step
// follows but did not make (share.go), which a face's caches may not hold.
func (e *Engine) podsBeforeVerdict(ctx context.Context, s Step, tj *trainer.TrainJob) ([]corev1.Pod, error) {
	if e.PodsBeforeVerdict != nil {
		return e.PodsBeforeVerdict(ctx, tj)
	}
	if s.Identity.Adopts(tj) {
		return nil, nil
	}
	return trainjob.ListPods(ctx, e.API, tj)
}

// deletedNote ends the message of a step whose job a deadline deleted, where the verdict's own
// words do not say so already (a startTimeout's, an invalid Job's and a deactivation's do).
func deletedNote(obs trainjob.Observation) string {
	if obs.Phase == trainjob.PhaseTimedOut || obs.Reason == trainjob.ReasonHung {
		return "; it was deleted"
	}
	return ""
}

// conclude carries out a terminal verdict: the failing pod's log tail, read while the pods are
// still there, then the delete or keep a deadline asks for. A write that fails is Err: the face
// looks again, and the next look decides the same; a write the apiserver forbids is said in the
// message instead, and the step ends. A job other steps follow is not deleted but let go of
// (share.go): it runs on for them.
func (e *Engine) conclude(ctx context.Context, s Step, tj *trainer.TrainJob, v trainjob.Verdict) Status {
	obs := e.tailer().WithTail(ctx, v)
	obs.Lost = e.lost(ctx, s, tj)
	st := Status{Observation: obs}
	switch {
	case v.Keep:
		v.Observation = obs
		st.Observation, st.Kept, st.Err = trainjob.ConcludeKeep(ctx, e.Writer, v)
	case v.Delete && len(trainjob.Holders(tj)) > 0:
		deleted, left, err := release(ctx, e.Writer, tj, s.Identity.OwnerUID, ownerRef(s.Identity)...)
		if apierrors.IsForbidden(err) {
			st.Message += e.mayNotDelete(obs, err)
			return st
		}
		if err != nil {
			st.Err = err
			st.Message += "; letting go of it failed and is retried: " + err.Error()
			return st
		}
		st.Deleted, st.Released = deleted, !deleted && left > 0
		switch {
		case st.Released:
			st.Message += releasedNote(obs.Name, left)
		default:
			st.Message += deletedNote(obs)
		}
	case v.Delete:
		err := trainjob.Delete(ctx, e.Writer, obs.Namespace, obs.Name)
		if apierrors.IsForbidden(err) {
			// Asking again gets the same answer: the step ends, and says what is left running.
			st.Message += e.mayNotDelete(obs, err)
			return st
		}
		if err != nil {
			st.Err = err
			st.Message += "; deleting it failed and is retried: " + err.Error()
			return st
		}
		st.Deleted = true
		st.Message += deletedNote(obs)
	}
	return st
}

// mayNotDelete says what a step whose TrainJob trainstep may not delete (or let go of) leaves.
func (e *Engine) mayNotDelete(obs trainjob.Observation, err error) string {
	return fmt.Sprintf("; trainstep may not delete it, so it may still be running: %v; delete it yourself "+
		"(kubectl delete trainjob -n %s %s) and grant trainstep the rules its install gives (%s)",
		err, obs.Namespace, obs.Name, e.rbacHint())
}

// markStarted records on the TrainJob that it started, so startTimeout never applies again,
// whichever process looks next; once, until the cache shows it (RecordStartAside: beside the
// look). A failure is tried again at the next look.
func (e *Engine) markStarted(ctx context.Context, tj *trainer.TrainJob, v trainjob.Verdict) {
	key := client.ObjectKeyFromObject(tj)
	if v.MarkStarted.IsZero() {
		if !trainjob.StartedAt(tj).IsZero() {
			e.marks.done(key)
		}
		return
	}
	if !e.marks.claim(key) {
		return
	}
	record := func(ctx context.Context) {
		if err := trainjob.MarkStarted(ctx, e.Writer, tj.Namespace, tj.Name, v.MarkStarted); err != nil {
			e.marks.done(key)
			if e.Warn != nil {
				e.Warn(ctx, "recording that a TrainJob started failed; tried again at the next look", err)
			}
		}
	}
	if !e.RecordStartAside {
		record(ctx)
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startRecordTimeout)
		defer cancel()
		record(ctx)
	}()
}

// startRecordTimeout bounds a start recorded beside the look; a later look tries again.
const startRecordTimeout = time.Minute

func (e *Engine) tailer() trainjob.Tailer {
	return trainjob.Tailer{Logs: e.Logs, Pods: e.API}
}

func (e *Engine) tails() *trainjob.Tails {
	if e.Tails == nil {
		return trainjob.NewTails() // a face that looks once per change needs no memory
	}
	return e.Tails
}

// maxEarlierAttempts bounds how many earlier attempts' names a step reads: an attempt number
// is the user's (--attempt), and the first found is the earliest.
const maxEarlierAttempts = 64

// firstSince is when the step's first attempt began, for a TrainJob it creates
// (annotationFirstSince): as the face knows it, or the job a retry replaces carries it, or the
// earliest earlier attempt's job the cache still has says; for a first attempt, now.
func (e *Engine) firstSince(ctx context.Context, s Step) time.Time {
	switch {
	case !s.FirstSince.IsZero():
		return s.FirstSince
	case !s.firstSince.IsZero():
		return s.firstSince
	}
	if at, ok := e.earlierStart(ctx, s); ok {
		return at
	}
	return e.now()
}

// earlierStart is when the earliest of the step's earlier attempts whose TrainJob the cache
// still has began (each attempt's name is its identity's): its first-since, else its creation.
func (e *Engine) earlierStart(ctx context.Context, s Step) (time.Time, bool) {
	for a := 0; a < min(s.Identity.Attempt, maxEarlierAttempts); a++ {
		id := s.Identity
		id.Attempt = a
		earlier := &trainer.TrainJob{}
		if e.Cache.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: id.Name()}, earlier) != nil || !id.Adopts(earlier) {
			continue
		}
		return firstSinceOf(earlier), true
	}
	return time.Time{}, false
}

// lost is the time earlier attempts of the step spent before tj, this attempt's, was created:
// from when the step's first attempt began (what tj carries, what the face knows, or the
// earliest earlier job still there) to tj's creation. Zero for the step's first TrainJob.
func (e *Engine) lost(ctx context.Context, s Step, tj *trainer.TrainJob) *time.Duration {
	d := time.Duration(0)
	if s.Identity.Attempt == 0 || !s.Identity.Adopts(tj) {
		return &d
	}
	first := firstSinceOf(tj)
	if f := s.FirstSince; !f.IsZero() && f.Before(first) {
		first = f
	}
	if at, ok := e.earlierStart(ctx, s); ok && at.Before(first) {
		first = at
	}
	d = max(tj.CreationTimestamp.Sub(first), 0)
	return &d
}
