package lifecycle

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/trainstep/trainstep/core/stepcache"
	"github.com/trainstep/trainstep/core/trainjob"
)

// The invariants of a step's life, checked after every event of every sequence. Each judges
// what happened since the last check (news: the writes that reached the apiserver and the looks
// of the faces) by the world's ground truth, and returns the first violation it finds, "" when
// none. A look that met a lagging cache or a fault other than on a create may have to look again
// (lookRecord.clean): what it left undone is judged at the next clean look.

// news is what happened since the invariants last looked.
type news struct {
	writes []write
	looks  []lookRecord
}

// invariant is one named property.
type invariant struct {
	name  string
	check func(w *world, n news) string
}

// modelInvariants are the properties every sequence keeps.
func modelInvariants() []invariant {
	return []invariant{
		{"at most one live TrainJob per step and attempt", oneLiveJobPerStep},
		{"no TrainJob deleted that another step holds", noHeldJobDeleted},
		{"no deadline acts before it passes", noDeadlineActsEarly},
		{"every step ends within its timeout plus one look", endsWithinItsTimeout},
		{"retries only for retryable classes, at most limit", retriesOnlyWhenRetryable},
		{"a failure is classed by its first failure, and retried when it can be", failuresClassedAndRetried},
		{"a success within maxAge is never trained again", aKeyTrainsOnce},
		{"a hit only for an identical key", hitsOnlyForTheSameKey},
		{"the time buckets sum to the wall time", bucketsSumToTheWallTime},
		{"a TrainJob someone deleted is not trained again", deletedIsNotTrainedAgain},
		{"an ended step leaves nothing of its own running", endedLeavesNothingRunning},
	}
}

// oneLiveJobPerStep: after a clean look, a step that has not ended has at most one TrainJob of
// its own that may still run (liveJobsOf): a retry replaces the job before it (a delete that
// failed is tried again at every later look of the step), a replayed or restarted face finds
// its job instead of making another, a follower follows one.
func oneLiveJobPerStep(w *world, n news) string {
	for _, l := range n.looks {
		if l.clean() && !l.status.Done() && len(l.live) > 1 {
			return fmt.Sprintf("step %s has %d TrainJobs that may still run after its look at %s: %v",
				w.steps[l.step].name, len(l.live), clockOf(l.start), l.live)
		}
	}
	return ""
}

// noHeldJobDeleted: a step's look deletes only a TrainJob of its own or one it holds, and only
// when no other step holds it: a step that ends early, or retries, lets go of a job others of
// its cache key follow, and the last one's end deletes it.
func noHeldJobDeleted(w *world, n news) string {
	for _, wr := range n.writes {
		if wr.verb != verbDelete || wr.actor < 0 {
			continue
		}
		x := w.steps[wr.actor]
		if !x.owns(wr.before) && !x.holds(wr.before) {
			return fmt.Sprintf("step %s deleted TrainJob %s at %s, which is neither its own nor held by it", x.name, wr.name, clockOf(wr.at))
		}
		for owner := range trainjob.Holders(wr.before) {
			if owner != x.id.OwnerUID {
				return fmt.Sprintf("step %s deleted TrainJob %s at %s, which the step of %s still holds", x.name, wr.name, clockOf(wr.at), owner)
			}
		}
	}
	return ""
}

// noDeadlineActsEarly: what trainstep does at a deadline happens once it has passed. A TrainJob
// that has not ended is deleted by a step's look only when the step is stopped, its timeout
// passed, a retry replaced the job, the job's startTimeout passed while nothing shows it
// started, or its hangTimeout passed since its function's last report; and a step ends
// TimedOut, StartTimeout or Hung only once that deadline passed.
func noDeadlineActsEarly(w *world, n news) string {
	for _, wr := range n.writes {
		if wr.verb == verbDelete && wr.actor >= 0 && !ended(wr.before) {
			if why := w.earlyDelete(w.steps[wr.actor], wr); why != "" {
				return why
			}
		}
	}
	for _, l := range n.looks {
		if why := w.earlyEnd(w.steps[l.step], l); why != "" {
			return why
		}
	}
	return ""
}

// earlyDelete says why a delete of a healthy TrainJob came before any of its deadlines.
func (w *world) earlyDelete(x *modelStep, wr write) string {
	t := wr.truth[wr.name]
	if w.looks[wr.look].stop || w.replaced(x, wr.name, wr.at) {
		return ""
	}
	deadline, start, hang := w.deadline(x), w.startDeadline(x, t), hangDeadline(x, t)
	switch {
	case !deadline.IsZero() && !wr.at.Before(deadline):
	case !start.IsZero() && !wr.at.Before(start) && !startedBy(wr.before, t):
	case !hang.IsZero() && !wr.at.Before(hang) && runs(t):
	default:
		return fmt.Sprintf("step %s deleted TrainJob %s at %s, which had not ended, before any deadline of it passed "+
			"(timeout at %s, startTimeout at %s, started %v, hangTimeout at %s)",
			x.name, wr.name, clockOf(wr.at), clockOf(deadline), clockOf(start), startedBy(wr.before, t), clockOf(hang))
	}
	return ""
}

// startedBy says the job shows it started: its nodes run, or a face recorded it started.
func startedBy(tj *trainer.TrainJob, t jobTruth) bool {
	return t.running || !trainjob.StartedAt(tj).IsZero()
}

// runs says the job runs as hangTimeout means it: it started and no queue holds it now (its
// nodes may be coming back after a re-admission, which the hang counts from).
func runs(t jobTruth) bool { return !t.started.IsZero() && !t.suspended }

// replaced says x made a retry of TrainJob name before at.
func (w *world) replaced(x *modelStep, name string, at time.Time) bool {
	for _, wr := range w.writes {
		if wr.verb == verbCreate && wr.actor == x.index && !wr.at.After(at) && wr.after.Annotations[annotationRetryOf] == name {
			return true
		}
	}
	return false
}

// earlyEnd says why a step's end on a deadline came before it.
func (w *world) earlyEnd(x *modelStep, l lookRecord) string {
	st := l.status
	if !st.Done() {
		return ""
	}
	var deadline time.Time
	switch st.Reason {
	case trainjob.ReasonTimeout:
		deadline = w.deadline(x)
	case trainjob.ReasonStartTimeout:
		deadline = w.startDeadline(x, *w.truth[st.Name])
	case trainjob.ReasonHung:
		deadline = hangDeadline(x, *w.truth[st.Name])
	default:
		return ""
	}
	if deadline.IsZero() || l.end.Before(deadline) {
		return fmt.Sprintf("step %s ended %s at %s, before its deadline (%s): %s", x.name, st.Reason, clockOf(l.end), clockOf(deadline), st.Message)
	}
	return ""
}

// endsWithinItsTimeout: a step with a timeout ends within one clean look once it has passed
// (the look that finds it passed may still have a job to read first: a follower that joins a
// job whose own timeout counts from its creation), whatever its creates meet; and where its face
// knows when the step began, a step that has not ended asks to be looked at again by then
// (Status.Wake), so a face that looks only when told (a watch, a held call, a requeue) does not
// outlive it. A look that names a job the face had not recorded (one it created, holds or
// retried as) is exempt: every face looks again at once at a job new to it.
func endsWithinItsTimeout(w *world, n news) string {
	for _, l := range n.looks {
		x := w.steps[l.step]
		deadline := w.deadline(x)
		st := l.status
		switch {
		case deadline.IsZero() || st.Done():
		case l.clean() && !l.start.Before(deadline) && w.lateLooks(x, deadline) > 1:
			return fmt.Sprintf("step %s did not end at its second clean look past its timeout at %s (at %s): %s %s: %s",
				x.name, clockOf(deadline), clockOf(l.start), st.Phase, st.Reason, st.Message)
		case x.face != faceArgoUntimed && st.Err == nil && st.Name == l.recorded && (st.Wake.IsZero() || st.Wake.After(deadline)):
			return fmt.Sprintf("step %s asked to be looked at again at %s, after its timeout at %s: %s %s: %s",
				x.name, clockOf(st.Wake), clockOf(deadline), st.Phase, st.Reason, st.Message)
		}
	}
	return ""
}

// lateLooks counts the clean looks of x's attempt, so far, at or past its deadline.
func (w *world) lateLooks(x *modelStep, deadline time.Time) int {
	n := 0
	for _, l := range w.looks {
		if l.step == x.index && l.attempt == x.attempt && l.clean() && !l.start.Before(deadline) {
			n++
		}
	}
	return n
}

// retriesOnlyWhenRetryable: a step's own retry (a TrainJob stamped retry-of) is retry 1 to
// limit, none starts once the step's timeout passed, and, where the look's cache showed the
// world as it was, it follows a job of the step that failed for a retryable class, once its
// backoff ended, or one that its startTimeout (while its pods wait for a reason a retry may
// mend) or hangTimeout ended.
func retriesOnlyWhenRetryable(w *world, n news) string {
	for _, wr := range n.writes {
		if wr.verb != verbCreate || wr.actor < 0 || wr.after.Annotations[annotationRetryOf] == "" {
			continue
		}
		if why := w.badRetry(w.steps[wr.actor], wr); why != "" {
			return fmt.Sprintf("step %s retried as TrainJob %s at %s: %s", w.steps[wr.actor].name, wr.name, clockOf(wr.at), why)
		}
	}
	return ""
}

// badRetry says what is wrong with a retry's create, "" when nothing is.
func (w *world) badRetry(x *modelStep, wr write) string {
	t, prev := w.truth[wr.name], wr.truth[wr.after.Annotations[annotationRetryOf]]
	if deadline := w.deadline(x); !deadline.IsZero() && !wr.at.Before(deadline) {
		return fmt.Sprintf("after the step's timeout at %s", clockOf(deadline))
	}
	if t.retry < 1 || t.retry > x.spec.limit || t.faceAttempt != x.attempt {
		return fmt.Sprintf("retry %d of the face's attempt %d, and the step is at attempt %d with retry.limit %d", t.retry, t.faceAttempt, x.attempt, x.spec.limit)
	}
	if w.looks[wr.look].lagging {
		return "" // the look judged a job its cache may show before it ended
	}
	switch {
	case prev.succeeded:
		return fmt.Sprintf("TrainJob %s succeeded", prev.name)
	case !prev.ended.IsZero() && !retryableTruth(prev.class):
		return fmt.Sprintf("TrainJob %s failed for %s, which is not retryable", prev.name, prev.class)
	case !prev.ended.IsZero() && wr.at.Before(prev.ended.Add(x.spec.backoff)):
		return fmt.Sprintf("TrainJob %s failed at %s, and the backoff of %s had not passed", prev.name, clockOf(prev.ended), x.spec.backoff)
	case !prev.ended.IsZero():
		return ""
	}
	start, hang := w.startDeadline(x, prev), hangDeadline(x, prev)
	if !hang.IsZero() && !wr.at.Before(hang) && runs(prev) {
		return ""
	}
	if start.IsZero() || wr.at.Before(start) {
		return fmt.Sprintf("TrainJob %s had not ended, and neither its startTimeout (%s) nor its hangTimeout (%s) had passed",
			prev.name, clockOf(start), clockOf(hang))
	}
	if prev.waiting == waitBadImage {
		return fmt.Sprintf("TrainJob %s waited on an image name no pull mends", prev.name)
	}
	return ""
}

// failuresClassedAndRetried: a step whose TrainJob failed says the class of the failure that
// came first (by when each node failed, not by node index); and a step of its own TrainJob's
// retryable failure, with retries left and time left (its backoff ends, and the face looks,
// before its timeout), is retried rather than ended (unless the retry's create was refused for
// good).
func failuresClassedAndRetried(w *world, n news) string {
	for _, l := range n.looks {
		st := l.status
		if !st.Done() || st.Phase != trainjob.PhaseFailed || st.Reason != modelFailReason {
			continue
		}
		x, t := w.steps[l.step], w.truth[st.Name]
		if st.Failure == nil || st.Failure.Class != t.class {
			return fmt.Sprintf("step %s ended with TrainJob %s's failure classed %v, and its first failure was %s: %s", x.name, t.name, st.Failure, t.class, st.Message)
		}
		if why := w.notRetried(x, l, *t); why != "" {
			return why
		}
	}
	return ""
}

// notRetried says why a step that ended on a retryable failure should have retried it.
func (w *world) notRetried(x *modelStep, l lookRecord, t jobTruth) string {
	if !x.made(t) || !retryableTruth(t.class) || t.retry >= x.spec.limit {
		return ""
	}
	for _, f := range l.faults {
		if isRefusal(f) {
			return ""
		}
	}
	at := l.start // a retry starts at the look, once its backoff ended
	if x.spec.backoff > 0 && t.ended.Add(x.spec.backoff).After(at) {
		at = t.ended.Add(x.spec.backoff)
	}
	if deadline := w.deadline(x); !deadline.IsZero() && !at.Before(deadline) {
		return ""
	}
	return fmt.Sprintf("step %s ended at %s on TrainJob %s's %s failure, retryable, at retry %d of %d, with time left",
		x.name, clockOf(l.end), t.name, t.class, t.retry, x.spec.limit)
}

// aKeyTrainsOnce: a cached step creates a TrainJob (its first: a retry trains again by choice)
// only when its key has no stored success younger than its maxAge and no other step's claim on
// it stands: a claimed TrainJob that still trains, or that succeeded within maxAge and whose
// step has not stored it yet. A store, or a read of the claimed job, that failed during the
// look excuses it: the step trains as if it had no cache block; and so does a hold of its owner's
// on the claimed job (an earlier attempt's): one hold per owner, docs/cache.md.
func aKeyTrainsOnce(w *world, n news) string {
	for _, wr := range n.writes {
		if wr.verb != verbCreate || wr.actor < 0 || wr.after.Annotations[annotationRetryOf] != "" {
			continue
		}
		x := w.steps[wr.actor]
		if x.spec.key == "" || cacheUnread(w, wr) {
			continue
		}
		if why := w.standing(x, wr); why != "" {
			return fmt.Sprintf("step %s trained its key again as TrainJob %s at %s: %s", x.name, wr.name, clockOf(wr.at), why)
		}
	}
	return ""
}

// cacheUnread says the look that made wr met a fault of the step cache's, or of the read of
// the TrainJob that claims the key: the step could not tell whether its key stands.
func cacheUnread(w *world, wr write) bool {
	for _, f := range w.looks[wr.look].faults {
		if isStoreFault(f) || f == (fault{verb: verbGet, kind: kindTrainJob, what: faultTimeout}).label() {
			return true
		}
	}
	return false
}

// standing says what success or training of x's key stood when the look that created wr began
// (before it claimed the key itself), as its creates judge it: from then to the create.
func (w *world) standing(x *modelStep, wr write) string {
	key, then := x.spec.key, w.looks[wr.look].before
	var entry stepcache.Entry
	if raw, ok := then.store[key]; ok && json.Unmarshal([]byte(raw), &entry) == nil && wr.at.Sub(entry.Stored) <= x.spec.maxAge {
		return fmt.Sprintf("TrainJob %s's success was stored at %s", entry.TrainJob, clockOf(entry.Stored))
	}
	var claim stepcache.Claim
	raw, ok := then.store["inflight.model."+key]
	if !ok || json.Unmarshal([]byte(raw), &claim) != nil || claim.TrainJob == wr.name {
		return ""
	}
	held, there := then.truth[claim.TrainJob]
	switch {
	case !there || !held.gone.IsZero():
		return ""
	case x.holds(then.jobs[claim.TrainJob]):
		return "" // one hold per owner: its earlier attempt's, and the attempt trains itself
	case held.ended.IsZero():
		return fmt.Sprintf("TrainJob %s, which claims the key, still trains", held.name)
	case held.succeeded && wr.at.Sub(held.ended) <= x.spec.maxAge:
		return fmt.Sprintf("TrainJob %s, which claims the key, succeeded at %s and was not stored yet", held.name, clockOf(held.ended))
	}
	return ""
}

// hitsOnlyForTheSameKey: a step served from the cache, or that followed another step's
// TrainJob, has the key of what it was served (the TrainJob that trained it carries the step's
// own key), and a hit that succeeded was served a success.
func hitsOnlyForTheSameKey(w *world, n news) string {
	for _, l := range n.looks {
		st, x := l.status, w.steps[l.step]
		if st.Cached == nil {
			continue
		}
		t := w.truth[st.Cached.From]
		switch {
		case x.spec.key == "" || st.CacheKey != x.spec.key:
			return fmt.Sprintf("step %s, key %.12s, was served from the cache under key %.12s", x.name, x.spec.key, st.CacheKey)
		case t == nil || t.key != x.spec.key:
			return fmt.Sprintf("step %s, key %.12s, was served TrainJob %s, which trained another key", x.name, x.spec.key, st.Cached.From)
		case st.Phase == trainjob.PhaseSucceeded && !t.succeeded:
			return fmt.Sprintf("step %s was served TrainJob %s as a success, which did not succeed", x.name, st.Cached.From)
		}
	}
	return ""
}

// bucketsSumToTheWallTime: a step that ends with a TrainJob of its own says where its time
// went: queue-wait, initializing and training seconds sum to duration-seconds, and lost-seconds
// is the time from when the step's first attempt began to this job's creation, 0 for the step's
// first job: as the Argo and Tekton faces know the start, or, at the first face attempt, its
// first TrainJob's creation (executor run's later attempts count from the earliest earlier
// job still there, docs/cost.md: not judged).
func bucketsSumToTheWallTime(w *world, n news) string {
	for _, l := range n.looks {
		st, x := l.status, w.steps[l.step]
		t := w.truth[st.Name]
		if !st.Done() || st.Cached != nil || t == nil || !x.made(*t) || !st.Phase.Terminal() {
			continue
		}
		out := st.Outputs()
		if out[trainjob.OutDuration] == "" {
			continue
		}
		sum := seconds(out[trainjob.OutQueueWait]) + seconds(out[trainjob.OutInitializing]) + seconds(out[trainjob.OutTraining])
		if sum != seconds(out[trainjob.OutDuration]) {
			return fmt.Sprintf("step %s's buckets sum to %d s, and its duration is %s s", x.name, sum, out[trainjob.OutDuration])
		}
		if want, known := w.lost(x, *t); known && out[trainjob.OutLost] != strconv.FormatInt(int64(want.Seconds()), 10) {
			return fmt.Sprintf("step %s's lost-seconds are %s, and its earlier attempts took %s", x.name, out[trainjob.OutLost], want)
		}
	}
	return ""
}

// lost is what the step's attempts before job t took, from the step's first start to t; known
// is false where the model does not say (executor run's later face attempts).
func (w *world) lost(x *modelStep, t jobTruth) (d time.Duration, known bool) {
	switch {
	case t.attempt == 0:
		return 0, true
	case x.face.timed():
		return t.created.Sub(x.firstBegan), true
	case t.faceAttempt > 0:
		return 0, false
	}
	job0 := w.truth[x.id.AtRetry(0, 0).Name()]
	if job0 == nil {
		return 0, false
	}
	return t.created.Sub(job0.created), true
}

func seconds(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// deletedIsNotTrainedAgain: a step whose recorded TrainJob (its own, or one it follows) someone
// deleted before it ended creates no TrainJob after that, at a look whose cache shows the delete:
// it fails, TrainJobDeleted, rather than train again from zero.
func deletedIsNotTrainedAgain(w *world, n news) string {
	for _, wr := range n.writes {
		if wr.verb == verbCreate && wr.actor >= 0 && !w.looks[wr.look].lagging {
			if x := w.steps[wr.actor]; x.deletedUnder != "" {
				return fmt.Sprintf("step %s created TrainJob %s at %s, after someone deleted TrainJob %s, which it recorded",
					x.name, wr.name, clockOf(wr.at), x.deletedUnder)
			}
		}
	}
	return ""
}

// endedLeavesNothingRunning: a step that ended at a clean look leaves no TrainJob of its own
// that may still run (liveJobsOf): a stop or a deadline deletes it, or lets go of it for the
// steps that follow it, and keepOnTimeout marks it kept.
func endedLeavesNothingRunning(w *world, n news) string {
	for _, l := range n.looks {
		if l.clean() && l.status.Done() && len(l.live) > 0 {
			st := l.status
			return fmt.Sprintf("step %s ended (%s %s) at %s and left %v running: %s", w.steps[l.step].name, st.Phase, st.Reason,
				clockOf(l.end), l.live, st.Message)
		}
	}
	return ""
}

// clockOf says a time as the time since the sequence began.
func clockOf(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return "+" + t.Sub(modelStart).String()
}
