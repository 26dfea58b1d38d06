package conformance_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/core/stepcache"
	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/realstack"
)

// The pair table: every pair of the step's features that meet, each run together. Nearly every
// defect of the third look (issue 47) sat where two features meet, each having passed its own
// test; the table makes each meeting a row, so a feature added later is a row per feature already
// there, and a meeting nobody thought of is a gap the test names.

// feature is one thing a step or its world does, as the pair table names it in a scenario's name.
type feature string

// The features the table crosses, in the order a pair names them.
const (
	fCache       feature = "cache"       // a hit: a success of the step's key stored within maxAge
	fFollow      feature = "follow"      // an in-flight follower: another step of the key trains
	fRetry       feature = "retry"       // trainstep's own retry: block
	fCheckpoint  feature = "checkpoint"  // checkpoint: a retry resumes
	fHang        feature = "hangTimeout" // hangTimeout
	fStart       feature = "startTimeout"
	fTimeout     feature = "timeout" // timeout and keepOnTimeout
	fStop        feature = "stop"    // the engine stops the step
	fEngineRetry feature = "engineRetry"
	fKueue       feature = "kueue" // Kueue queueing, preemption and eviction
	fMultiKueue  feature = "multikueue"
	fRestart     feature = "restart" // the face restarts mid-step with nothing in memory
)

func features() []feature {
	return []feature{fCache, fFollow, fRetry, fCheckpoint, fHang, fStart, fTimeout, fStop, fEngineRetry, fKueue, fMultiKueue, fRestart}
}

// pair is one row of the table: a and b in features' order, and exactly one of a scenario, the
// tests that prove it elsewhere, or why the meeting means nothing.
type pair struct {
	a, b feature
	// scenario names the conformance scenario that runs the pair through every face the engine
	// allows: "<a>+<b>/<what happens>", its expected end in its want.
	scenario string
	// provedBy names the tests that run the pair where the conformance stack cannot, and
	// because says why it cannot.
	provedBy []string
	because  string
	// why says why the pair is meaningless or cannot happen.
	why string
}

// The reasons shared by several rows.
const (
	noStatusServer = "the conformance stack runs the Trainer with its status-server gate off (no function reports there); " +
		"the hang suites (test/realstack/argo, tekton and progress) run it on"
	twoClusters = "MultiKueue needs a manager and a worker cluster: test/realstack/multikueue's stack, not the table's"
	inLifecycle = "the meeting lives in core/lifecycle, which the model drives with the two together in every order " +
		"and at every moment, on each face's way of looking; the table's faces would stage one order of it"
	restartAll = "the table's Tekton controller is shared by every scenario and the Argo sidecar lives in its agent's harness: " +
		"restarting one step's face restarts it for all; each face's TestRestartMidJob restarts it alone"
	noJobAHit = "a hit makes no TrainJob"
)

// pairs is the table. TestThePairTable checks it covers each pair once and writes docs/pairs.md.
func pairs() []pair {
	model := []string{"TestLifecycleModel"}
	return []pair{
		{a: fCache, b: fFollow, why: "one look finds a stored success (a hit) or another step's claim in flight (a follower), " +
			"not both; a follower's owner stores the success that makes the next run a hit (InFlightStepsOfOneKeyTrainOnce, " +
			"TheSameStepAgainIsServedFromTheCache)"},
		{a: fCache, b: fRetry, scenario: "cache+retry/ASuccessAfterARetryIsServed"},
		{a: fCache, b: fCheckpoint, why: noJobAHit + ", so it resumes from nothing; the checkpoint block is in the TrainJob's " +
			"spec the key is made of, so another checkpoint location is another key"},
		{a: fCache, b: fHang, why: noJobAHit + ": there is no function to hear from (a follower's hang timer is follow+hangTimeout)"},
		{a: fCache, b: fStart, why: noJobAHit + ": nothing to start"},
		{a: fCache, b: fTimeout, why: "a hit ends at its first look, before a timeout can pass; keepOnTimeout has no job to keep"},
		{a: fCache, b: fStop, why: "a hit ends at its first look: there is no running step to stop"},
		{a: fCache, b: fEngineRetry, scenario: "cache+engineRetry/AFailedRunIsNeverServed"},
		{a: fCache, b: fKueue, why: noJobAHit + ", so nothing is queued"},
		{a: fCache, b: fMultiKueue, why: noJobAHit + ", so nothing is sent to a worker"},
		{a: fCache, b: fRestart, why: "a hit is one look: a face that restarts before it answers looks again and reads the same entry"},

		{a: fFollow, b: fRetry, provedBy: append(model, "TestARetryLetsGoOfAJobAnotherStepFollows", "TestAFollowerWithARetryBlockKeepsItsRecord"), because: inLifecycle},
		{a: fFollow, b: fCheckpoint, why: "a follower trains nothing of its own: the job it follows resumes as its owner's step " +
			"says (retry+checkpoint)"},
		{a: fFollow, b: fHang, provedBy: model, because: noStatusServer + "; " + inLifecycle},
		{a: fFollow, b: fStart, provedBy: append(model, "TestAFollowersDeadlinesCountFromItsOwnStart"), because: inLifecycle + " (a follower's startTimeout counts from its own start, " +
			"not the followed job's creation)"},
		{a: fFollow, b: fTimeout, scenario: "follow+timeout/AFollowerTimesOutAndLeavesTheJobTraining"},
		{a: fFollow, b: fStop, scenario: "follow+stop/StoppingOneOfTwoInFlightStepsLeavesTheOtherTraining"},
		{a: fFollow, b: fEngineRetry, provedBy: model, because: inLifecycle},
		{a: fFollow, b: fKueue, provedBy: model, because: inLifecycle + " (a followed job suspended and admitted again)"},
		{a: fFollow, b: fMultiKueue, why: "a follower reads the claimed TrainJob on the manager cluster as it reads any: " +
			"MultiKueue changes where the job runs, not what a follower reads (the mirrored status: multikueue+…)"},
		{a: fFollow, b: fRestart, provedBy: model, because: restartAll + "; the model restarts a follower's face and checks it " +
			"finds its hold again"},

		{a: fRetry, b: fCheckpoint, scenario: "retry+checkpoint/AnOOMKilledStepResumesInItsRetry"},
		{a: fRetry, b: fHang, provedBy: append(model, "TestAHungJobIsRetriedThenFailsAsHung"), because: noStatusServer},
		{a: fRetry, b: fStart, scenario: "retry+startTimeout/AnUnschedulableStepIsRetriedThenEnds"},
		{a: fRetry, b: fTimeout, scenario: "retry+timeout/NoRetryStartsPastTheTimeout"},
		{a: fRetry, b: fStop, scenario: "retry+stop/AStopWhileARetryWaitsMakesNoRetry"},
		{a: fRetry, b: fEngineRetry, scenario: "retry+engineRetry/EachEngineAttemptRetriesOnItsOwn"},
		{a: fRetry, b: fKueue, scenario: "retry+kueue/ARetryIsQueuedAgainAndAdmitted"},
		{a: fRetry, b: fMultiKueue, provedBy: append(model, "TestMultiKueueFailureCarriesTheRemoteCause"), because: twoClusters +
			"; it proves the class a retry is decided on is the worker's, and the retry itself is the lifecycle's"},
		{a: fRetry, b: fRestart, provedBy: append(model, "TestRestartMidJob"), because: restartAll},

		{a: fCheckpoint, b: fHang, provedBy: append(model, "TestHangCountsOnlyTheFunctionsReports"), because: noStatusServer +
			"; the resumed run's own post of its checkpoint must not arm the hang timer"},
		{a: fCheckpoint, b: fStart, why: "startTimeout ends a job that never started, which trained nothing to resume from; " +
			"the retry it may make resumes as any retry does (retry+checkpoint)"},
		{a: fCheckpoint, b: fTimeout, why: "trainstep neither reads nor deletes a checkpoint: a step that timed out leaves its " +
			"directory as it was, its job kept or not; only an attempt of the same step resumes from it"},
		{a: fCheckpoint, b: fStop, why: "as with a timeout: a stop leaves the checkpoint directory as it was"},
		{a: fCheckpoint, b: fEngineRetry, scenario: "checkpoint+engineRetry/ARetryResumesFromTheCheckpoint"},
		{a: fCheckpoint, b: fKueue, scenario: "checkpoint+kueue/PreemptedThenRequeuedWhereItWas"},
		{a: fCheckpoint, b: fMultiKueue, why: "the checkpoint volume is the user's storage, which the worker's pods mount as any " +
			"pod does; trainstep sets the same directory and attempt on either cluster"},
		{a: fCheckpoint, b: fRestart, why: "a face's restart changes nothing of the running job or its volume: the directory is " +
			"fixed by the step and its attempt, not by the face's memory"},

		{a: fHang, b: fStart, why: "startTimeout bounds a job until it started, hangTimeout counts from the function's first " +
			"report, which comes after: the two never bound a job at once"},
		{a: fHang, b: fTimeout, provedBy: model, because: noStatusServer + "; whichever passes first ends the step, " +
			"in every order the model makes"},
		{a: fHang, b: fStop, why: "a stop ends the step at once, whatever its hang timer says"},
		{a: fHang, b: fEngineRetry, provedBy: model, because: noStatusServer + "; the next attempt's job has a hang timer of its own"},
		{a: fHang, b: fKueue, provedBy: model, because: noStatusServer + "; a job Kueue suspended has no pods to report, " +
			"and its timer counts from the last report after admission"},
		{a: fHang, b: fMultiKueue, why: "the function reports to the Trainer's status server of the cluster its pods run on; " +
			"MultiKueue's manager sees what the worker's TrainJob status mirrors, and the hang timer reads that as on one cluster"},
		{a: fHang, b: fRestart, provedBy: model, because: noStatusServer + "; the timer counts from the TrainJob's status, " +
			"not the face's memory"},

		{a: fStart, b: fTimeout, provedBy: model, because: inLifecycle + " (whichever passes first ends the step)"},
		{a: fStart, b: fStop, why: "a stop ends the step at once, whatever its startTimeout says"},
		{a: fStart, b: fEngineRetry, scenario: "startTimeout+engineRetry/ARetryCountsTheAttemptAStartTimeoutDeletedAsLost"},
		{a: fStart, b: fKueue, scenario: "startTimeout+kueue/QueuedPastStartTimeoutThenAdmitted"},
		{a: fStart, b: fMultiKueue, provedBy: []string{"TestMultiKueueStepQueuedLongerThanItsStartTimeoutCompletes"}, because: twoClusters},
		{a: fStart, b: fRestart, provedBy: model, because: restartAll + "; started-at is recorded on the TrainJob, not in memory"},

		{a: fTimeout, b: fStop, why: "whichever comes first ends the step; the other then has no step to act on"},
		{a: fTimeout, b: fEngineRetry, provedBy: model, because: inLifecycle + " (an engine's next attempt after a timeout " +
			"gets a TrainJob and a timeout of its own)"},
		{a: fTimeout, b: fKueue, scenario: "timeout+kueue/QueuedPastItsTimeoutEnds"},
		{a: fTimeout, b: fMultiKueue, provedBy: []string{"TestMultiKueueCancelOnTheManagerDeletesTheRemoteJob"}, because: twoClusters +
			"; a timeout deletes the manager's TrainJob as a cancel does"},
		{a: fTimeout, b: fRestart, provedBy: model, because: restartAll},

		{a: fStop, b: fEngineRetry, why: "an engine does not retry what it stopped: a stopped Workflow, a cancelled PipelineRun " +
			"or an interrupted container step has no next attempt"},
		{a: fStop, b: fKueue, scenario: "stop+kueue/StoppedWhileQueued"},
		{a: fStop, b: fMultiKueue, provedBy: []string{"TestMultiKueueCancelOnTheManagerDeletesTheRemoteJob"}, because: twoClusters},
		{a: fStop, b: fRestart, provedBy: model, because: restartAll},

		{a: fEngineRetry, b: fKueue, provedBy: model, because: inLifecycle + " (each attempt's TrainJob is queued on its own)"},
		{a: fEngineRetry, b: fMultiKueue, provedBy: []string{"TestMultiKueueFailureCarriesTheRemoteCause"}, because: twoClusters +
			"; an engine retries on the class and retryable outputs, which it proves are the worker's"},
		{a: fEngineRetry, b: fRestart, provedBy: model, because: restartAll},

		{a: fKueue, b: fMultiKueue, why: "MultiKueue is Kueue: the manager's ClusterQueue admits and dispatches the Workload; " +
			"test/realstack/multikueue runs them as one"},
		{a: fKueue, b: fRestart, provedBy: model, because: restartAll + "; Kueue's suspension is read from the TrainJob"},

		{a: fMultiKueue, b: fRestart, provedBy: []string{"TestMultiKueueStartedStepOutlivesAWorkerPodRestart"}, because: twoClusters +
			"; a face's restart on the manager is the same as on one cluster (restart+…), the worker's is proved there"},
	}
}

// pairScenarios are the table's scenarios that the single-feature table above does not have; each
// is named for its pair and says how many TrainJobs the checked run made and left.
func pairScenarios() []scenario {
	return []scenario{{
		name: "cache+retry/ASuccessAfterARetryIsServed",
		// The earlier run's first TrainJob is OOMKilled, trainstep's retry succeeds and is stored:
		// this run is served the retry's outputs and makes nothing.
		step:    retriedStep(`KWOK_FAIL_ATTEMPT: "0"`, "retry: {limit: 1}\ncache: {maxAge: 1h, salt: conformance-retry}\n"),
		earlier: sameStep,
		want: want{phase: "Succeeded", outputs: map[string]string{trainjob.OutCacheHit: `^true$`, trainjob.OutCachedFrom: `^\S+$`,
			"result-loss": `^0\.25$`}, jobs: &jobCount{made: 0, left: 0}},
		also:  servedTheRetry,
		lacks: lacksPodBlock,
	}, {
		name: "follow+timeout/AFollowerTimesOutAndLeavesTheJobTraining",
		// This run follows the earlier run's TrainJob and times out first: it ends timed out and
		// lets go of the job, which the earlier run's step (its timeout longer) sees succeed.
		step: `
framework: torch
runtime: {name: ` + realstack.NoRetryRuntime + `, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 1
  env: {KWOK_RUN_SECONDS: "45"}
  func: |
    def train():
        pass
cache: {maxAge: 1h, salt: conformance-follow-timeout}
timeout: 20s
`,
		earlier:   func(doc string) string { return strings.Replace(doc, "timeout: 20s", "timeout: 3m", 1) },
		alongside: true,
		want: want{phase: "TimedOut", reason: trainjob.ReasonTimeout, waiting: `following TrainJob`,
			jobs: &jobCount{made: 0, left: 0}},
		skip: map[string]string{"argo": inFlightArgo},
	}, {
		name: "retry+startTimeout/AnUnschedulableStepIsRetriedThenEnds",
		// Unschedulable is a cause a retry may mend (a Node may come): the first TrainJob is
		// deleted at its startTimeout and retried once; the retry waits as long, and the step ends.
		step: unschedulableStep("15s") + "retry: {limit: 1}\n",
		want: want{phase: "Failed", reason: trainjob.ReasonStartTimeout,
			message: `(?s)did not start within 15s \(startTimeout\); it was deleted.*Insufficient nvidia\.com/gpu`,
			outputs: failedAs(trainjob.ClassUnschedulable, true, nil), trainJob: gone, jobs: &jobCount{made: 2, left: 0}},
	}, {
		name: "retry+timeout/NoRetryStartsPastTheTimeout",
		// The OOMKilled job is retryable, but its backoff ends after the step's timeout: no retry
		// is made (it would be deleted at its first look), and the step ends as its job did.
		step: failingStep(`KWOK_FAIL_REASON: OOMKilled, KWOK_FAIL_EXIT_CODE: "137"`) + "retry: {limit: 2, backoff: 10m}\n",
		want: want{phase: "Failed", reason: "FailedJobs", outputs: failedAs(trainjob.ClassOOM, true, nil),
			jobs: &jobCount{made: 1, left: 1}},
	}, {
		name: "retry+stop/AStopWhileARetryWaitsMakesNoRetry",
		// Stopped while its retry waits out the backoff: no retry is made, and the failed job stays
		// for its logs, as a failed step's does (until its Workflow, CustomRun or step pod goes).
		step: strings.Replace(failingStep(`KWOK_FAIL_REASON: OOMKilled, KWOK_FAIL_EXIT_CODE: "137"`), "timeout: 3m", "timeout: 30m", 1) +
			"retry: {limit: 1, backoff: 10m}\n",
		action: func(t *testing.T, r *running) {
			r.waitSaid(t, `trainstep retries it at \S+ \(retry 1 of 1\)`)
			r.stop(t)
		},
		want: want{phase: stopped, jobs: &jobCount{made: 1, left: 1}},
	}, {
		name: "retry+engineRetry/EachEngineAttemptRetriesOnItsOwn",
		// Every TrainJob is OOMKilled: each of the engine's two attempts makes its own and retries
		// it once, four in all, none deleted (failed jobs are kept for their logs).
		step:    failingStep(`KWOK_FAIL_REASON: OOMKilled, KWOK_FAIL_EXIT_CODE: "137"`) + "retry: {limit: 1}\n",
		retries: 1,
		want: want{phase: "Failed", reason: "FailedJobs", outputs: failedAs(trainjob.ClassOOM, true, nil),
			jobs: &jobCount{made: 4, left: 4}},
	}, {
		name: "retry+kueue/ARetryIsQueuedAgainAndAdmitted",
		// The queued step's first TrainJob is OOMKilled; trainstep's retry is queued in the same
		// LocalQueue, admitted once the first gave its GPU back, and succeeds.
		// Its runtime restarts no node (torch-distributed's JobSet would restart the failed one
		// until Kueue's waitForPodsReady evicted and deactivated it).
		queue: &queue{gpus: 1},
		step: strings.Replace(queuedStep(checkpointBlock+"retry: {limit: 1}\n",
			`KWOK_FAIL_ATTEMPT: "0"`, `KWOK_FAIL_REASON: OOMKilled`, `KWOK_FAIL_EXIT_CODE: "137"`),
			"name: torch-distributed,", "name: "+realstack.NoRetryRuntime+",", 1),
		want: want{phase: "Succeeded", outputs: map[string]string{trainjob.OutAttempt: `^1$`, trainjob.OutPreemptions: `^0$`},
			jobs: &jobCount{made: 2, left: 2}},
		also:  retriesQueuedIn,
		lacks: lacksPodBlock,
	}, {
		name: "timeout+kueue/QueuedPastItsTimeoutEnds",
		// A queue with no GPU quota never admits the step: its timeout still ends it, and the
		// TrainJob and its Workload go.
		queue: &queue{gpus: 0},
		step:  strings.Replace(queuedStep(""), "timeout: 4m", "timeout: 20s", 1),
		want: want{phase: "TimedOut", reason: trainjob.ReasonTimeout, outputs: failedAs(trainjob.ClassTimeout, false, nil),
			trainJob: gone, jobs: &jobCount{made: 1, left: 0}},
	}}
}

// retriedStep is a one-node step with a checkpoint block (so each attempt's pods carry
// TRAINSTEP_ATTEMPT, which KWOK_FAIL_ATTEMPT picks) whose failures are OOMKills, with env
// (`NAME: "value"` pairs) and extra (unindented) added.
func retriedStep(env, extra string) string {
	return `
framework: torch
runtime: {name: ` + realstack.NoRetryRuntime + `, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 1
  env:
    ` + env + `
    KWOK_FAIL_REASON: OOMKilled
    KWOK_FAIL_EXIT_CODE: "137"
    KWOK_TERMINATION_MESSAGE: '{"trainstep.dev/result": {"loss": 0.25}}'
  func: |
    def train():
        pass
` + checkpointBlock + `timeout: 3m
` + extra
}

// servedTheRetry: the entry the hit was served is the earlier run's retry, attempt 1.
func servedTheRetry(t *testing.T, got result) {
	entry, err := stepcache.Store{API: stack.Client}.Get(t.Context(), got.step.ns, got.outputs[trainjob.OutCacheKey])
	require.NoError(t, err)
	require.NotNil(t, entry, "stored in %s/%s", got.step.ns, stepcache.ConfigMapName)
	assert.Equal(t, got.outputs[trainjob.OutCachedFrom], entry.TrainJob, "the hit names the stored TrainJob")
	assert.Equal(t, "1", got.outputs[trainjob.OutAttempt], "the stored outputs are the retry's")
}

// retriesQueuedIn: both of the step's TrainJobs name its queue, the retry as the first did.
func retriesQueuedIn(t *testing.T, got result) {
	jobs := got.step.trainJobs(t)
	require.Len(t, jobs, 2)
	for _, tj := range jobs {
		assert.Equal(t, got.step.queue, tj.Labels[trainjob.LabelKueueQueue], "TrainJob %s", tj.Name)
	}
}

var updatePairs = flag.Bool("update-pairs", false, "rewrite docs/pairs.md from the pair table")

// TestThePairTable checks the table covers every pair of features() once, each row with exactly
// one of a scenario (in scenarios(), named for its pair), tests elsewhere that exist, or a why;
// and that docs/pairs.md is the table as written (-update-pairs rewrites it).
func TestThePairTable(t *testing.T) {
	rows := pairs()
	byName := map[string]scenario{}
	for _, sc := range scenarios() {
		byName[sc.name] = sc
	}
	tests := testFuncs(t, filepath.Join("..", ".."))
	fs := features()
	seen := map[[2]feature]bool{}
	for _, p := range rows {
		ia, ib := slices.Index(fs, p.a), slices.Index(fs, p.b)
		require.True(t, ia >= 0 && ib > ia, "%s+%s: features in the order of features()", p.a, p.b)
		k := [2]feature{p.a, p.b}
		assert.False(t, seen[k], "%s+%s twice", p.a, p.b)
		seen[k] = true
		kinds := 0
		for _, set := range []bool{p.scenario != "", len(p.provedBy) > 0, p.why != ""} {
			if set {
				kinds++
			}
		}
		assert.Equal(t, 1, kinds, "%s+%s: exactly one of a scenario, provedBy or why", p.a, p.b)
		if p.scenario != "" {
			assert.True(t, strings.HasPrefix(p.scenario, string(p.a)+"+"+string(p.b)+"/"), "%s is named <a>+<b>/<what happens>", p.scenario)
			sc, ok := byName[p.scenario]
			if assert.True(t, ok, "%s is in scenarios()", p.scenario) {
				assert.NotEmpty(t, sc.want.phase, "%s states its end", p.scenario)
			}
		}
		for _, name := range p.provedBy {
			assert.Contains(t, tests, name, "%s+%s: provedBy %s is a test of this repository", p.a, p.b, name)
		}
		if len(p.provedBy) > 0 {
			assert.NotEmpty(t, p.because, "%s+%s: why the table cannot run it", p.a, p.b)
		}
	}
	for i, a := range fs {
		for _, b := range fs[i+1:] {
			assert.True(t, seen[[2]feature{a, b}], "%s+%s has no row", a, b)
		}
	}
	// Every scenario named for a pair is the table's.
	for name := range byName {
		if strings.Contains(strings.SplitN(name, "/", 2)[0], "+") {
			assert.True(t, slices.ContainsFunc(rows, func(p pair) bool { return p.scenario == name }), "%s has a row", name)
		}
	}
	doc := pairsDoc(rows, byName)
	path := filepath.Join("..", "..", "docs", "pairs.md")
	if *updatePairs {
		require.NoError(t, os.WriteFile(path, []byte(doc), 0o644))
	}
	on, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, doc, string(on), "docs/pairs.md is not the pair table: go test ./test/conformance -run '^TestThePairTable$' -update-pairs")
}

// testFuncs is the names of the Test functions in the repository's _test.go files.
func testFuncs(t *testing.T, root string) []string {
	re := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	var names []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllSubmatch(b, -1) {
			names = append(names, string(m[1]))
		}
		return nil
	})
	require.NoError(t, err)
	return names
}

// pairsDoc is docs/pairs.md: the table, each scenario's expected end from its want.
func pairsDoc(rows []pair, byName map[string]scenario) string {
	var b strings.Builder
	b.WriteString(`# Every pair of features, run together

<!-- Written by TestThePairTable (test/conformance/pairs_test.go) from the table there:
     go test ./test/conformance -run '^TestThePairTable$' -update-pairs -->

Each feature of a step was first proved alone; nearly every defect issue 47 found sat where two
meet. This table crosses every pair of: ` + featureList() + `. A pair whose meeting
means something is a conformance scenario, ` + "`<feature>+<feature>/<what happens>`" + `, run through every face
the engine allows (` + "`go test ./test/conformance -run 'TestConformance/retry\\+kueue/'`" + `) with its
expected end below; a pair the conformance stack cannot stage names the tests that run it, and why;
a pair that means nothing says why. ` + "`TestThePairTable`" + ` fails when a pair has no row, a row names a
scenario or test that does not exist, or this file is not the table.

| pair | how it is proved | expected end, or why |
|---|---|---|
`)
	for _, p := range rows {
		name := string(p.a) + "+" + string(p.b)
		switch {
		case p.scenario != "":
			fmt.Fprintf(&b, "| %s | conformance `%s` | %s |\n", name, p.scenario, expectedEnd(byName[p.scenario]))
		case len(p.provedBy) > 0:
			fmt.Fprintf(&b, "| %s | `%s` | %s |\n", name, strings.Join(p.provedBy, "`, `"), p.because)
		default:
			fmt.Fprintf(&b, "| %s | no scenario: it means nothing | %s |\n", name, p.why)
		}
	}
	return b.String()
}

func featureList() string {
	var names []string
	for _, f := range features() {
		names = append(names, "`"+string(f)+"`")
	}
	return strings.Join(names, ", ")
}

// expectedEnd is a scenario's want in words: phase, reason, outputs, TrainJobs made and left.
func expectedEnd(sc scenario) string {
	w := sc.want
	parts := []string{w.phase}
	if w.reason != "" {
		parts[0] += " (" + w.reason + ")"
	}
	keys := make([]string, 0, len(w.outputs))
	for k := range w.outputs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := strings.Trim(w.outputs[k], "^$")
		if v == "" {
			parts = append(parts, k+" empty")
			continue
		}
		parts = append(parts, k+" `"+v+"`")
	}
	if w.jobs != nil {
		parts = append(parts, fmt.Sprintf("TrainJobs made %d, left %d", w.jobs.made, w.jobs.left))
	}
	switch w.trainJob {
	case gone:
		parts = append(parts, "its TrainJob deleted")
	case kept:
		parts = append(parts, "its TrainJob kept")
	}
	if len(sc.skip) > 0 {
		var faces []string
		for f := range sc.skip {
			faces = append(faces, f)
		}
		sort.Strings(faces)
		parts = append(parts, "not on "+strings.Join(faces, ", ")+" (the scenario says why)")
	}
	return strings.ReplaceAll(strings.Join(parts, "; "), "|", `\|`)
}
