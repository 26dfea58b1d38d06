package lifecycle

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainjob"
)

// The model's steps: a small set of specs, each run by one of four kinds of face, and the
// face's looks.

// modelTrainer is every spec's trainer: an image and a command, so a TrainJob is a kilobyte
// (a function's command script is eleven) and the fake apiserver's JSON round trips stay cheap.
// The lifecycle reads no part of what a job trains.
const modelTrainer = "framework: torch\ntrainer: {kind: CustomTrainerContainer, numNodes: 2, image: example.com/train:1, command: [python, train.py]}\n"

// specChoice is what a model spec sets beside its trainer.
type specChoice struct {
	cache      bool
	salt       string
	limit      int
	backoff    string
	timeout    string
	keep       bool
	startAfter string // startTimeout
	hangAfter  string // hangTimeout
	checkpoint bool
}

// randomSpec picks a spec; a step of the same key picks its deadlines again with againDeadlines.
func randomSpec(r *rand.Rand) specChoice {
	c := specChoice{cache: r.IntN(10) < 7, checkpoint: r.IntN(10) < 4}
	c.againDeadlines(r)
	return c
}

// againDeadlines picks what does not enter the cache key: the retries and the deadlines.
func (c *specChoice) againDeadlines(r *rand.Rand) {
	c.limit, c.backoff = 0, ""
	if r.IntN(2) == 0 {
		c.limit = 1 + r.IntN(3)
		c.backoff = pick(r, "", "", "1m", "10m")
	}
	c.timeout = pick(r, "", "30m", "1h", "2h")
	c.keep = c.timeout != "" && r.IntN(10) == 0
	c.startAfter = pick(r, "", "", "10m", "20m")
	c.hangAfter = pick(r, "", "", "", "15m", "15m")
}

func pick[T any](r *rand.Rand, choices ...T) T { return choices[r.IntN(len(choices))] }

// text is the spec as a user writes it.
func (c specChoice) text() string {
	var b strings.Builder
	b.WriteString(modelTrainer)
	if c.cache {
		fmt.Fprintf(&b, "cache: {maxAge: 6h, salt: %q}\n", c.salt)
	}
	if c.limit > 0 {
		fmt.Fprintf(&b, "retry: {limit: %d", c.limit)
		if c.backoff != "" {
			fmt.Fprintf(&b, ", backoff: %s", c.backoff)
		}
		b.WriteString("}\n")
	}
	for _, d := range [][2]string{{"timeout", c.timeout}, {"startTimeout", c.startAfter}, {"hangTimeout", c.hangAfter}} {
		if d[1] != "" {
			fmt.Fprintf(&b, "%s: %s\n", d[0], d[1])
		}
	}
	if c.keep {
		b.WriteString("keepOnTimeout: true\n")
	}
	if c.checkpoint {
		b.WriteString("checkpoint: {uri: \"s3://models/ckpt\"}\n")
	}
	return b.String()
}

// modelSpec is a spec parsed, with its cache key and the bounds the invariants judge by.
type modelSpec struct {
	text    string
	spec    *step.Spec
	key     string
	limit   int
	backoff time.Duration
	maxAge  time.Duration
	d       trainjob.Deadlines
}

// spec parses a spec once per runner: the key is what a look that trains computes.
func (r *modelRunner) spec(ctx context.Context, text string) (*modelSpec, error) {
	if s, ok := r.specs[text]; ok {
		return s, nil
	}
	parsed, err := step.Parse([]byte(text))
	if err != nil {
		return nil, fmt.Errorf("the model's spec does not parse: %w\n%s", err, text)
	}
	plan, err := r.planner.Plan(ctx, parsed, modelNamespace)
	if err != nil {
		return nil, fmt.Errorf("the model's spec does not plan: %w\n%s", err, text)
	}
	s := &modelSpec{text: text, spec: parsed, limit: parsed.RetryLimit(), d: trainjob.StepDeadlines(parsed)}
	if s.key, err = cacheKey(Step{Spec: parsed}, plan); err != nil {
		return nil, err
	}
	if parsed.Retry != nil && parsed.Retry.Backoff != nil {
		s.backoff = parsed.Retry.Backoff.Duration
	}
	if parsed.Cache != nil {
		s.maxAge = parsed.Cache.MaxAge.Duration
	}
	r.specs[text] = s
	return s, nil
}

// faceKind is how a face gives the engine the attempt's times, and how its cache reads.
type faceKind int

const (
	// faceCLI is `executor run`: the attempt's start is its own (Step.Begun), its cache untrimmed.
	faceCLI faceKind = iota
	// faceArgo is the Argo plugin with the node's start (Deadlines.Since, FirstSince): its cache,
	// trimmed, holds its own Workflow's TrainJobs only (Cluster.Scoped).
	faceArgo
	// faceTekton is the Tekton controller with the attempt's start: its cache, trimmed, holds
	// every TrainJob.
	faceTekton
	// faceArgoUntimed is the Argo plugin whose Workflow does not show the step's node: no times
	// at all, the timeout counting from the first TrainJob.
	faceArgoUntimed
	faceKinds
)

var faceNames = [...]string{faceCLI: "executor run", faceArgo: "Argo", faceTekton: "Tekton", faceArgoUntimed: "Argo, node unknown"}

// timed says the face gives the engine when the attempt began (Deadlines.Since, FirstSince).
func (f faceKind) timed() bool { return f == faceArgo || f == faceTekton }

// scoped says the face's cache holds its own run's TrainJobs only.
func (f faceKind) scoped() bool { return f == faceArgo || f == faceArgoUntimed }

// modelStep is one step and its face: what the face keeps between looks, and how it ended.
type modelStep struct {
	index  int
	name   string
	spec   *modelSpec
	face   faceKind
	id     trainjob.Identity
	engine *Engine
	// attempt is the face's attempt (Identity.Attempt: Argo's {{retries}}, a CustomRun's retries,
	// --attempt), began when it began, firstBegan when the first did.
	attempt           int
	began, firstBegan time.Time
	// recorded is the face's record (Step.Recorded); firstRecorded the first it had.
	recorded, firstRecorded string
	stopping, done          bool
	last                    Status
	// deletedUnder is a recorded TrainJob a person deleted before the step ended.
	deletedUnder string
}

func newModelStep(i int, spec *modelSpec, face faceKind) *modelStep {
	return &modelStep{index: i, name: string(rune('A' + i)), spec: spec, face: face,
		id: trainjob.Identity{Engine: "model", OwnerUID: fmt.Sprintf("run-%c", 'a'+i), StepKey: "train"}}
}

// begin starts the step now, with a face of its own.
func (x *modelStep) begin(w *world) {
	x.began, x.firstBegan = w.clock.Now(), w.clock.Now()
	x.engine = w.newEngine(x)
}

// retryAttempt is the engine running an ended step again as its next attempt (Argo's
// retryStrategy, Tekton's retries, executor run --attempt): the face keeps no record of the
// attempt before; executor run is a new process.
func (x *modelStep) retryAttempt(w *world) {
	x.attempt++
	x.began = w.clock.Now()
	x.recorded, x.firstRecorded, x.deletedUnder = "", "", ""
	x.stopping, x.done, x.last = false, false, Status{}
	if x.face == faceCLI {
		x.engine = w.newEngine(x)
	}
}

// newEngine is a face's engine as it starts: nothing in memory.
func (w *world) newEngine(x *modelStep) *Engine {
	return &Engine{
		Cluster: Cluster{Cache: faceCache{w: w, trim: x.face != faceCLI, scope: x.scope()}, Scoped: x.face.scoped(),
			API: w.api, Writer: w.api, Snapshot: w.snapshotOf, Creates: NewCreates()},
		Planner: w.planner, Tails: trainjob.NewTails(), Clock: w.clock,
	}
}

// step is what the face hands the engine at a look.
func (x *modelStep) step() Step {
	s := Step{Spec: x.spec.spec, Namespace: modelNamespace, Identity: x.id, Deadlines: x.spec.d,
		Recorded: x.recorded, Stop: x.stopping}
	s.Identity.Attempt = x.attempt
	switch x.face {
	case faceCLI:
		s.Begun = x.began
	case faceArgo, faceTekton:
		s.Deadlines.Since, s.FirstSince = x.began, x.firstBegan
	}
	return s
}

// scope is the owner whose TrainJobs the face's cache holds, "" for every owner's.
func (x *modelStep) scope() string {
	if x.face.scoped() {
		return x.id.OwnerUID
	}
	return ""
}

// active says the step has begun and not ended.
func (x *modelStep) active() bool { return !x.began.IsZero() && !x.done }

// owns says tj is one of the step's own TrainJobs, at any of its attempts and retries.
func (x *modelStep) owns(tj *trainer.TrainJob) bool {
	per := x.spec.limit + 1
	for a := 0; a < (x.attempt+1)*per; a++ {
		id := x.id
		id.Attempt = a
		if id.Owns(tj.Labels) {
			return true
		}
	}
	return false
}

// made says job t is one of the step's attempt's own: an earlier attempt's, which it may follow
// like another step's, is not.
func (x *modelStep) made(t jobTruth) bool { return t.step == x.index && t.faceAttempt == x.attempt }

// holds says the step holds tj (a step holds it under its owner's label, valued with the
// identity of the retry that made or followed it).
func (x *modelStep) holds(tj *trainer.TrainJob) bool {
	_, ok := trainjob.Holders(tj)[x.id.OwnerUID]
	return ok
}

// look is one look of the step's face, recorded with what it met.
func (w *world) look(x *modelStep) {
	if !x.active() {
		return
	}
	w.actor, w.lookFaults = x.index, nil
	rec := lookRecord{step: x.index, attempt: x.attempt, start: w.clock.Now(), stop: x.stopping, recorded: x.recorded,
		lagging: w.lagFor > 0}
	if x.spec.key != "" {
		rec.before = w.snapshot() // what a cached step's creates are judged by (aKeyTrainsOnce)
	}
	st := x.engine.Look(w.ctx, x.step())
	w.actor = -1
	rec.end, rec.status, rec.faults = w.clock.Now(), st, w.lookFaults
	if st.Name != "" && st.Reason != ReasonNameTaken {
		x.recorded = st.Name // as every face records it: gone from now on, it was deleted
		if x.firstRecorded == "" {
			x.firstRecorded = st.Name
		}
	}
	x.last, x.done = st, st.Done()
	rec.live = w.liveJobsOf(x)
	w.looks = append(w.looks, rec)
}

// nextLook is when the face looks again though nothing changes: the status's Wake, or, after
// trouble that may pass, a back-off; zero when never.
func (x *modelStep) nextLook(now time.Time) time.Time {
	if !x.active() {
		return time.Time{}
	}
	if x.last.Err != nil {
		return earliest(now.Add(backoffMax), x.last.Wake)
	}
	return x.last.Wake
}

// deadline is when the step's timeout passes, as its face counts it: from the attempt's start
// (executor run's own, the Argo node's or Tekton attempt's), or, where the face knows none,
// from its first TrainJob's creation; zero without a timeout, or before that job.
func (w *world) deadline(x *modelStep) time.Time {
	timeout := x.spec.d.Timeout
	switch {
	case timeout <= 0:
		return time.Time{}
	case x.face != faceArgoUntimed:
		return x.began.Add(timeout)
	}
	if t := w.truth[x.firstRecorded]; t != nil {
		return t.created.Add(timeout)
	}
	return time.Time{}
}

// startDeadline is when startTimeout passes for job t of step x: from when the step's deadlines
// count (a retry's from its own creation), or its last re-admission when later.
func (w *world) startDeadline(x *modelStep, t jobTruth) time.Time {
	after := x.spec.d.StartTimeout
	if after <= 0 {
		return time.Time{}
	}
	origin := x.began
	if x.face == faceArgoUntimed || (t.retryOf != "" && x.made(t)) {
		origin = t.created
	}
	if t.resumed.After(origin) {
		origin = t.resumed
	}
	return origin.Add(after)
}

// hangDeadline is when hangTimeout passes for job t: from its function's last report, or its
// last re-admission when later; zero when the function never reported.
func hangDeadline(x *modelStep, t jobTruth) time.Time {
	after := x.spec.d.HangTimeout
	if after <= 0 || t.reported.IsZero() {
		return time.Time{}
	}
	from := t.reported
	if t.resumed.After(from) {
		from = t.resumed
	}
	return from.Add(after)
}
