package lifecycle

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/trainstep/trainstep/core/trainjob"
)

// What the world does in a sequence. Every event applies in any state (it does nothing where it
// has nothing to do: a job's node cannot run once the job ended), so a failing sequence shrinks
// by dropping events and stays meaningful. Which TrainJob an event of the Trainer's is about is
// chosen when it applies (pick, among the live ones, oldest first).

type eventKind int

const (
	evLook     eventKind = iota // a step's face looks
	evLookAll                   // every face looks
	evWake                      // the clock moves to the next look a face asked for, and it looks
	evAdvance                   // the clock moves on
	evBegin                     // the second step begins
	evStop                      // a step is stopped, and its face looks
	evRestart                   // a step's face restarts with nothing in memory
	evLag                       // the faces' informer lags for n events
	evFault                     // requests fail, or the store is slow, for a while
	evWait                      // a job's pods wait to start, and say why
	evRun                       // a job's nodes all run
	evReport                    // a job's function reports progress
	evFail                      // a job's nodes fail, and JobSet fails it
	evComplete                  // a job succeeds
	evSuspend                   // Kueue preempts a job
	evResume                    // Kueue admits it again
	evDelete                    // a person deletes a TrainJob
	evAttempt                   // the engine runs a step that ended, not stopped, as its next attempt
)

// event is one thing the world does.
type event struct {
	kind  eventKind
	step  int
	pick  int
	d     time.Duration
	n     int
	fault fault
	why   string
	// first fails node `node` d ago, then second (when set) the other node.
	first, second trainjob.FailureClass
	node          int
}

// eventWeights say how often each kind comes: looks and the clock most, as in a step's life.
var eventWeights = [...]int{
	evLook: 20, evLookAll: 10, evWake: 12, evAdvance: 8, evBegin: 3, evStop: 2, evRestart: 3,
	evLag: 3, evFault: 7, evWait: 4, evRun: 10, evReport: 4, evFail: 5, evComplete: 7, evSuspend: 2,
	evResume: 2, evDelete: 1, evAttempt: 2,
}

// randomEvent draws one event.
func randomEvent(r *rand.Rand) event {
	total := 0
	for _, w := range eventWeights {
		total += w
	}
	n, kind := r.IntN(total), eventKind(0)
	for ; n >= eventWeights[kind]; kind++ {
		n -= eventWeights[kind]
	}
	e := event{kind: kind, step: r.IntN(2), pick: r.IntN(4)}
	switch kind {
	case evAdvance:
		e.d = pick(r, 10*time.Second, time.Minute, 5*time.Minute, 12*time.Minute, 12*time.Minute, 40*time.Minute, 3*time.Hour, 7*time.Hour)
	case evLag:
		e.n = 1 + r.IntN(4)
	case evFault:
		e.fault = randomFault(r)
	case evWait:
		e.why = pick(r, waitUnschedulable, waitUnschedulable, waitImage, waitBadImage)
	case evFail:
		e.first = pick(r, trainjob.ClassOOM, trainjob.ClassCode, trainjob.ClassPreempted, trainjob.ClassEvicted, trainjob.ClassNodeLost)
		e.second = pick[trainjob.FailureClass](r, "", trainjob.ClassCode, trainjob.ClassCode)
		e.node, e.d = r.IntN(modelNodes), pick(r, 2*time.Second, 20*time.Second, 50*time.Second)
	}
	return e
}

// randomFault draws what fails, how, and for how many requests: a few, or for good.
func randomFault(r *rand.Rand) fault {
	f := pick(r,
		fault{verb: verbCreate, kind: kindTrainJob, what: faultInternal},
		fault{verb: verbCreate, kind: kindTrainJob, what: faultTimeout},
		fault{verb: verbCreate, kind: kindTrainJob, what: faultLost},
		fault{verb: verbCreate, kind: kindTrainJob, what: faultConflict},
		fault{verb: verbCreate, kind: kindTrainJob, what: faultForbidden},
		fault{verb: verbCreate, kind: kindTrainJob, what: faultInvalid},
		fault{verb: verbDelete, kind: kindTrainJob, what: faultInternal},
		fault{verb: verbDelete, kind: kindTrainJob, what: faultForbidden},
		fault{verb: verbPatch, kind: kindTrainJob, what: faultConflict},
		fault{verb: verbPatch, kind: kindTrainJob, what: faultInternal},
		fault{verb: verbGet, kind: kindTrainJob, what: faultTimeout},
		fault{verb: verbGet, kind: kindStore, what: faultInternal},
		fault{verb: verbUpdate, kind: kindStore, what: faultConflict},
		fault{verb: verbUpdate, kind: kindStore, what: faultTimeout},
		fault{kind: kindStore, what: faultSlow},
	)
	f.left = pick(r, 1, 2, 3, 6, 1000)
	if f.what == faultSlow {
		f.slow = pick(r, 5*time.Second, 40*time.Second, 3*time.Minute)
	}
	return f
}

// apply does the event in the world; false when it had nothing to do.
func (w *world) apply(e event) bool {
	defer w.endEvent()
	switch e.kind {
	case evLook, evStop, evRestart, evAttempt:
		return w.applyToStep(e)
	case evLookAll:
		return w.lookAll(func(*modelStep) bool { return true })
	case evWake:
		return w.wake()
	case evAdvance:
		w.clock.Step(e.d)
		return true
	case evBegin:
		return w.beginNext()
	case evLag:
		w.lag(e.n)
		return true
	case evFault:
		f := e.fault
		w.faults = append(w.faults, &f)
		return true
	}
	return w.applyToJob(e)
}

// applyToStep is an event of one step's face.
func (w *world) applyToStep(e event) bool {
	x := w.steps[e.step%len(w.steps)]
	if e.kind == evAttempt {
		return w.nextAttempt(x)
	}
	if !x.active() {
		return false
	}
	switch e.kind {
	case evStop:
		x.stopping = true
	case evRestart:
		x.engine = w.newEngine(x)
		return true
	}
	w.look(x)
	return true
}

// nextAttempt runs a step that ended, but not by a stop, as its next attempt (at most two
// more), and its face looks.
func (w *world) nextAttempt(x *modelStep) bool {
	if !x.done || x.last.Stopped || x.attempt >= 2 {
		return false
	}
	x.retryAttempt(w)
	w.look(x)
	return true
}

// lookAll is a look of every active face that which picks.
func (w *world) lookAll(which func(*modelStep) bool) bool {
	looked := false
	for _, x := range w.steps {
		if x.active() && which(x) {
			w.look(x)
			looked = true
		}
	}
	return looked
}

// wake moves the clock to the next look a face asked for, and those faces look.
func (w *world) wake() bool {
	now := w.clock.Now()
	var next time.Time
	for _, x := range w.steps {
		next = earliest(next, x.nextLook(now))
	}
	if next.IsZero() {
		return false
	}
	if next.After(now) {
		w.clock.SetTime(next)
	}
	return w.lookAll(func(x *modelStep) bool {
		at := x.nextLook(now)
		return !at.IsZero() && !at.After(next)
	})
}

// beginNext begins the first step that has not begun, and its face looks.
func (w *world) beginNext() bool {
	for _, x := range w.steps {
		if x.began.IsZero() {
			x.begin(w)
			w.look(x)
			return true
		}
	}
	return false
}

// applyToJob is an event of the Trainer's, Kueue's or a person's about a live TrainJob.
func (w *world) applyToJob(e event) bool {
	name := w.liveJob(e.pick)
	if name == "" {
		return false
	}
	switch e.kind {
	case evWait:
		return w.wait(name, e.why)
	case evRun:
		return w.run(name)
	case evReport:
		return w.report(name)
	case evFail:
		return w.fail(name, e.node, e.first, e.second, e.d)
	case evComplete:
		return w.complete(name)
	case evSuspend:
		return w.suspend(name)
	case evResume:
		return w.resume(name)
	case evDelete:
		return w.personDeletes(name)
	}
	return false
}

// describe says the event as a sequence's trace prints it, in a sequence of steps steps.
func (e event) describe(steps int) string {
	step := string(rune('A' + e.step%steps))
	job := fmt.Sprintf("live job #%d", e.pick)
	switch e.kind {
	case evLook:
		return "look " + step
	case evLookAll:
		return "every face looks"
	case evWake:
		return "the clock moves to the next wake, and its face looks"
	case evAdvance:
		return "the clock moves on " + e.d.String()
	case evBegin:
		return "the next step begins"
	case evStop:
		return "stop " + step
	case evRestart:
		return "the face of " + step + " restarts"
	case evLag:
		return fmt.Sprintf("the faces' cache lags for %d events", e.n)
	case evFault:
		return "fault: " + e.fault.String()
	case evWait:
		return fmt.Sprintf("%s: pods wait (%s)", job, e.why)
	case evRun:
		return job + ": every node runs"
	case evReport:
		return job + ": the function reports"
	case evFail:
		s := fmt.Sprintf("%s: node %d fails (%s) %s ago", job, e.node, e.first, e.d)
		if e.second != "" {
			s += fmt.Sprintf(", then node %d (%s)", (e.node+1)%modelNodes, e.second)
		}
		return s + "; JobSet fails it"
	case evComplete:
		return job + ": succeeds"
	case evSuspend:
		return job + ": Kueue suspends it (preempted)"
	case evResume:
		return job + ": Kueue admits it again"
	case evDelete:
		return job + ": a person deletes it"
	case evAttempt:
		return "the engine runs " + step + " again as its next attempt"
	}
	return fmt.Sprintf("event %d", e.kind)
}
