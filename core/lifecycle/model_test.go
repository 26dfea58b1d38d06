package lifecycle

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/runtimes/stock"
	"github.com/trainstep/trainstep/core/trainers"
	"github.com/trainstep/trainstep/core/trainjob"
)

var (
	modelSeedFlag      = flag.Uint64("lifecycle.seed", 0, "TestLifecycleModel: replay this sequence alone, printing its trace")
	modelKeepFlag      = flag.String("lifecycle.keep", "", "TestLifecycleModel: with -lifecycle.seed, replay only these events (as a shrunk sequence prints them)")
	modelSequencesFlag = flag.Int("lifecycle.sequences", 0, "TestLifecycleModel: how many sequences (default 10000, or $LIFECYCLE_MODEL_SEQUENCES)")
)

const (
	// defaultModelSequences is what plain go test runs; LIFECYCLE_MODEL_SEQUENCES and
	// LIFECYCLE_MODEL_FOR (a duration) run more (make soak).
	defaultModelSequences = 10000
	// modelReports bounds the violations shrunk and printed; the rest are counted.
	modelReports = 3
)

// TestLifecycleModel is a model checker for a step's life (docs/testing.md, "The lifecycle
// model"): the real Engine, on a fake apiserver and a fake clock, driven by random sequences of
// what the world does (model_events_test.go), with the invariants (model_invariants_test.go)
// checked after every event. A sequence is its seed: a violation prints the seed, the sequence
// shrunk to the events that still break the invariant, and the command that replays it.
func TestLifecycleModel(t *testing.T) {
	scheme, err := trainjob.NewScheme()
	require.NoError(t, err)
	if *modelSeedFlag != 0 {
		replayModel(t, scheme, *modelSeedFlag, parseKeep(t, *modelKeepFlag))
		return
	}
	cfg := modelConfigFrom(t)
	sum := runModel(t.Context(), scheme, cfg)
	t.Logf("lifecycle model: %d sequences, %d events, %d invariants, %d violations", sum.sequences, sum.events, len(modelInvariants()), len(sum.failed))
	if cfg.base != 1 {
		t.Logf("lifecycle model: seeds %d to %d", cfg.base, cfg.base+uint64(sum.sequences)-1)
	}
	if len(sum.failed) == 0 {
		return
	}
	t.Log(violationsByInvariant(sum.failed))
	slices.SortFunc(sum.failed, func(a, b outcome) int { return cmp.Compare(a.seq.seed, b.seq.seed) })
	r := mustRunner(t, scheme)
	for _, o := range sum.failed[:min(len(sum.failed), modelReports)] {
		t.Error(r.report(t.Context(), o))
	}
}

// summary is what a run of many sequences found: the failed ones are kept whole.
type summary struct {
	sequences, events int
	failed            []outcome
}

// violationsByInvariant counts the failed sequences by the invariant each broke, with the seeds.
func violationsByInvariant(failed []outcome) string {
	seeds := map[string][]uint64{}
	for _, o := range failed {
		seeds[o.violation.invariant] = append(seeds[o.violation.invariant], o.seq.seed)
	}
	var b strings.Builder
	b.WriteString("lifecycle model: violations by invariant:")
	for _, name := range slices.Sorted(maps.Keys(seeds)) {
		s := seeds[name]
		fmt.Fprintf(&b, "\n  %q: %d (seeds %v)", name, len(s), s[:min(len(s), 8)])
	}
	return b.String()
}

// modelConfig is how many sequences a run makes, from which seed, for how long at most.
type modelConfig struct {
	sequences int
	base      uint64
	budget    time.Duration
}

func modelConfigFrom(t *testing.T) modelConfig {
	cfg := modelConfig{sequences: defaultModelSequences, base: 1}
	if testing.Short() {
		cfg.sequences = defaultModelSequences / 10
	}
	if v := os.Getenv("LIFECYCLE_MODEL_SEQUENCES"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "LIFECYCLE_MODEL_SEQUENCES")
		cfg.sequences = n
	}
	if *modelSequencesFlag > 0 {
		cfg.sequences = *modelSequencesFlag
	}
	if v := os.Getenv("LIFECYCLE_MODEL_SEED_BASE"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "LIFECYCLE_MODEL_SEED_BASE")
		cfg.base = n
	}
	if v := os.Getenv("LIFECYCLE_MODEL_FOR"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "LIFECYCLE_MODEL_FOR")
		cfg.budget = d
	}
	return cfg
}

// runModel runs cfg's sequences on every CPU, each worker with a runner of its own; it stops
// early when the budget is spent or enough sequences failed to say the code is broken.
func runModel(ctx context.Context, scheme *k8sruntime.Scheme, cfg modelConfig) summary {
	seeds, results := make(chan uint64), make(chan outcome)
	var failures atomic.Int64
	var workers sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		workers.Go(func() {
			r, err := newModelRunner(ctx, scheme)
			for seed := range seeds {
				o := outcome{seq: generate(seed)}
				if err == nil {
					o = r.run(ctx, o.seq, nil, nil)
				} else {
					o.violation = &violation{invariant: "the model runs", message: err.Error()}
				}
				if o.violation != nil {
					failures.Add(1)
				}
				results <- o
			}
		})
	}
	go func() {
		defer close(seeds)
		stop := time.Now().Add(cfg.budget)
		for i := range cfg.sequences {
			if (cfg.budget > 0 && time.Now().After(stop)) || failures.Load() >= 20*modelReports || ctx.Err() != nil {
				return
			}
			seeds <- cfg.base + uint64(i)
		}
	}()
	go func() {
		workers.Wait()
		close(results)
	}()
	var sum summary
	for o := range results {
		sum.sequences, sum.events = sum.sequences+1, sum.events+o.events
		if o.violation != nil {
			sum.failed = append(sum.failed, o)
		}
	}
	return sum
}

// replayModel runs one sequence (keep: only those events) and logs its trace.
func replayModel(t *testing.T, scheme *k8sruntime.Scheme, seed uint64, keep []int) {
	r := mustRunner(t, scheme)
	seq := generate(seed)
	t.Log(seq.header())
	o := r.run(t.Context(), seq, keep, func(line string) { t.Log(line) })
	if o.violation != nil {
		t.Errorf("violation of %q at event %d: %s", o.violation.invariant, o.violation.event, o.violation.message)
	}
}

func parseKeep(t *testing.T, s string) []int {
	if s == "" {
		return nil
	}
	var keep []int
	for _, f := range strings.Split(s, ",") {
		i, err := strconv.Atoi(strings.TrimSpace(f))
		require.NoError(t, err, "-lifecycle.keep")
		keep = append(keep, i)
	}
	return keep
}

// sequence is one run of the model: its steps and what the world does, all from its seed.
type sequence struct {
	seed   uint64
	steps  []stepPlan
	events []event
}

// stepPlan is a step of a sequence: its spec and the kind of face that runs it.
type stepPlan struct {
	spec specChoice
	face faceKind
}

// generate makes the sequence of a seed: one step, or two of one cache key (or, now and then,
// of another key or other deadlines), the second beginning at an evBegin; 12 to 40 events.
func generate(seed uint64) sequence {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	a := randomSpec(r)
	seq := sequence{seed: seed, steps: []stepPlan{{a, faceKind(r.IntN(int(faceKinds)))}}}
	n := 12 + r.IntN(29)
	for range n {
		seq.events = append(seq.events, randomEvent(r))
	}
	if r.IntN(2) == 0 {
		b := a
		switch r.IntN(5) {
		case 3:
			b.againDeadlines(r)
		case 4:
			b.salt = "another"
		}
		seq.steps = append(seq.steps, stepPlan{b, faceKind(r.IntN(int(faceKinds)))})
		seq.events[r.IntN(n)] = event{kind: evBegin}
	}
	return seq
}

// header says a sequence's steps.
func (s sequence) header() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d:", s.seed)
	for i, p := range s.steps {
		spec := strings.TrimSuffix(strings.TrimPrefix(p.spec.text(), modelTrainer), "\n")
		fmt.Fprintf(&b, "\n  step %c (%s, run-%c): %s", 'A'+i, faceNames[p.face], 'a'+i, strings.ReplaceAll(spec, "\n", "; "))
	}
	return b.String()
}

// outcome is how a sequence went.
type outcome struct {
	seq       sequence
	events    int
	violation *violation
}

// violation is an invariant a sequence broke, and at which event.
type violation struct {
	invariant, message string
	event              int
}

// modelRunner runs sequences one at a time: a worker's planner and parsed specs.
type modelRunner struct {
	scheme     *k8sruntime.Scheme
	planner    *trainjob.Planner
	specs      map[string]*modelSpec
	invariants []invariant
}

// catalogSource serves runtimes decoded once: decoding the stock manifests is most of a
// plan's time, and a step is planned at every create.
type catalogSource struct{ catalog runtimes.Catalog }

func (c catalogSource) List(context.Context, string) (runtimes.Catalog, error) { return c.catalog, nil }

func newModelRunner(ctx context.Context, scheme *k8sruntime.Scheme) (*modelRunner, error) {
	catalog, err := stock.Source{}.List(ctx, modelNamespace)
	if err != nil {
		return nil, err
	}
	return &modelRunner{scheme: scheme, planner: &trainjob.Planner{Trainers: trainers.Builtin(), Runtimes: catalogSource{catalog}},
		specs: map[string]*modelSpec{}, invariants: modelInvariants()}, nil
}

func mustRunner(t *testing.T, scheme *k8sruntime.Scheme) *modelRunner {
	r, err := newModelRunner(t.Context(), scheme)
	require.NoError(t, err)
	return r
}

// run runs a sequence (keep: only those of its events, nil: all), telling trace each event and
// the looks it made; it stops at the first violation. A panic is a violation of the model's own.
func (r *modelRunner) run(ctx context.Context, seq sequence, keep []int, trace func(string)) (o outcome) {
	o.seq = seq
	defer func() {
		if p := recover(); p != nil {
			o.violation = &violation{invariant: "the model runs", message: fmt.Sprintf("panic: %v", p), event: o.events - 1}
		}
	}()
	w, err := r.world(ctx, seq)
	if err != nil {
		o.violation = &violation{invariant: "the model runs", message: err.Error()}
		return o
	}
	if keep == nil {
		keep = make([]int, len(seq.events))
		for i := range keep {
			keep[i] = i
		}
	}
	var seen checked
	for _, i := range keep {
		o.events++
		looks := len(w.looks)
		did := w.apply(seq.events[i])
		if trace != nil {
			trace(traceLine(w, i, seq.events[i], did, looks))
		}
		if v := r.check(w, &seen); v != nil {
			v.event = i
			o.violation = v
			return o
		}
	}
	return o
}

// world is a sequence's cluster with its steps, the first begun.
func (r *modelRunner) world(ctx context.Context, seq sequence) (*world, error) {
	w := newWorld(ctx, r.scheme)
	w.planner = r.planner
	for i, p := range seq.steps {
		spec, err := r.spec(ctx, p.spec.text())
		if err != nil {
			return nil, err
		}
		w.steps = append(w.steps, newModelStep(i, spec, p.face))
	}
	w.steps[0].begin(w)
	return w, nil
}

// checked counts the writes and looks the invariants have judged.
type checked struct{ writes, looks int }

// check runs every invariant on what happened since the last check.
func (r *modelRunner) check(w *world, seen *checked) *violation {
	n := news{writes: w.writes[seen.writes:], looks: w.looks[seen.looks:]}
	seen.writes, seen.looks = len(w.writes), len(w.looks)
	for _, inv := range r.invariants {
		if msg := inv.check(w, n); msg != "" {
			return &violation{invariant: inv.name, message: msg}
		}
	}
	return nil
}

// traceLine says an event and what the looks it made said.
func traceLine(w *world, i int, e event, did bool, looksBefore int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%3d %s %s", i, clockOf(w.clock.Now()), e.describe(len(w.steps)))
	if !did {
		b.WriteString(" (nothing to do)")
	}
	for _, l := range w.looks[looksBefore:] {
		st := l.status
		fmt.Fprintf(&b, "\n      %s looks: %s %s %s", w.steps[l.step].name, st.Phase, st.Reason, firstLine(st.Message))
		if len(l.faults) > 0 {
			fmt.Fprintf(&b, " [met %s]", strings.Join(l.faults, ", "))
		}
	}
	return b.String()
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

// report shrinks a failed sequence and says how to replay it.
func (r *modelRunner) report(ctx context.Context, o outcome) string {
	v := o.violation
	keep := r.shrink(ctx, o.seq, *v)
	var b strings.Builder
	fmt.Fprintf(&b, "lifecycle model: seed %d breaks %q\n  %s\n%s\n", o.seq.seed, v.invariant, v.message, o.seq.header())
	fmt.Fprintf(&b, "  shrunk from %d events to %d; replay: go test ./core/lifecycle -run 'TestLifecycleModel$' -v -lifecycle.seed=%d -lifecycle.keep=%s\n",
		v.event+1, len(keep), o.seq.seed, joinInts(keep))
	shrunk := r.run(ctx, o.seq, keep, func(line string) { b.WriteString("  " + strings.ReplaceAll(line, "\n", "\n  ") + "\n") })
	if sv := shrunk.violation; sv != nil {
		fmt.Fprintf(&b, "  → %s: %s", sv.invariant, sv.message)
	}
	return b.String()
}

// shrink drops events from a failing sequence while it still breaks the same invariant:
// chunks of halving size, then single events until none can go.
func (r *modelRunner) shrink(ctx context.Context, seq sequence, v violation) []int {
	keep := make([]int, v.event+1)
	for i := range keep {
		keep[i] = i
	}
	fails := func(k []int) bool {
		o := r.run(ctx, seq, k, nil)
		return o.violation != nil && o.violation.invariant == v.invariant
	}
	for chunk := max(len(keep)/2, 1); ; {
		removed := false
		for i := 0; i < len(keep); {
			trial := slices.Concat(keep[:i], keep[min(i+chunk, len(keep)):])
			if len(trial) > 0 && fails(trial) {
				keep, removed = trial, true
			} else {
				i += chunk
			}
		}
		if chunk == 1 && !removed {
			return keep
		}
		if !removed || chunk > 1 {
			chunk = max(chunk/2, 1)
		}
	}
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// A seed replays the same sequence whatever ran before it in the runner: its trace (every
// event, every look's status) is the same in a runner fresh and in one that ran other seeds.
func TestLifecycleModelReplaysASeed(t *testing.T) {
	scheme, err := trainjob.NewScheme()
	require.NoError(t, err)
	warm := mustRunner(t, scheme)
	for seed := uint64(1000); seed < 1040; seed++ {
		warm.run(t.Context(), generate(seed), nil, nil)
	}
	for seed := uint64(1); seed <= 20; seed++ {
		var fresh, again []string
		mustRunner(t, scheme).run(t.Context(), generate(seed), nil, func(line string) { fresh = append(fresh, line) })
		warm.run(t.Context(), generate(seed), nil, func(line string) { again = append(again, line) })
		require.Equal(t, fresh, again, "seed %d", seed)
	}
}
