package conformance_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/core/lifecycle"
	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/tekton"
)

// The face's own end beside its outputs in a record: the phase and reason the face shows (the CLI's
// exit code, the Argo node's phase, the CustomRun's condition), in the core's terms. A dot is in no
// output's name (Argo's parameter names allow none), so neither can stand for an output.
const (
	facePhase  = "face.phase"
	faceReason = "face.reason"
)

// record is what one face returned for a scenario's step: every output it carries, and its own
// phase and reason.
type record map[string]string

func recordOf(got result) record {
	rec := record{facePhase: got.phase, faceReason: got.reason}
	maps.Copy(rec, got.outputs)
	return rec
}

// String is the record as one line of JSON, its keys sorted, nothing escaped for HTML.
func (rec record) String() string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]string(rec)); err != nil {
		return fmt.Sprintf("%q", err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// byFace is what each face that ran a scenario returned, for the differential check once all have
// ended (compare, in the scenario's Cleanup: Go runs a test's cleanups after its parallel subtests).
type byFace struct {
	mu   sync.Mutex
	recs map[string]record
	// runs are the names of each face's run (runNames), which its message may contain.
	runs map[string][]string
}

// add records a face's result and logs it as `OUTPUTS <scenario> <face> <record>`, one line.
func (b *byFace) add(t *testing.T, scenario, face string, got result) {
	t.Helper()
	rec := recordOf(got)
	t.Logf("OUTPUTS %s %s %s", scenario, face, rec)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.recs == nil {
		b.recs, b.runs = map[string]record{}, map[string][]string{}
	}
	b.recs[face], b.runs[face] = rec, runNames(got)
}

// compare asserts that every face that ran the scenario returned the same (differences).
func (b *byFace) compare(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, d := range differences(b.recs, b.runs) {
		t.Error(d)
	}
}

// differences says where the records of the faces that ran a scenario differ: every field of
// theirs must be equal, but for those differsByFace compares otherwise. An output a face does not
// carry differs from one carried empty (a task that refers to a Tekton result that is not there
// fails), but for the empty values that stand for none (carried). A face that was skipped, or
// failed before its step ended, has no record; one face alone has nothing to differ from.
func differences(recs map[string]record, runs map[string][]string) []string {
	var ran []string
	for _, f := range faces {
		if _, ok := recs[f.name()]; ok {
			ran = append(ran, f.name())
		}
	}
	fields := map[string]bool{}
	for _, rec := range recs {
		for k := range rec {
			fields[k] = true
		}
	}
	var diffs []string
	for _, field := range slices.Sorted(maps.Keys(fields)) {
		rule, ok := differsByFace[field]
		if !ok {
			rule = fieldRule{same: asItIs}
		}
		var shown strings.Builder
		compared := make([]string, len(ran))
		for i, f := range ran {
			v, there := recs[f][field]
			compared[i] = absent
			if there && carried(f, recs[f], field) {
				compared[i] = rule.same(seen{face: f, value: v, rec: recs[f], run: runs[f]})
			}
			fmt.Fprintf(&shown, "\n  %s: %s", f, quoteOrAbsent(v, there))
			if compared[i] != strconv.Quote(v) {
				fmt.Fprintf(&shown, ", compared as %s", compared[i])
			}
		}
		if slices.ContainsFunc(compared, func(c string) bool { return c != compared[0] }) {
			diffs = append(diffs, fmt.Sprintf("the faces differ in %s (%s):%s", field, cmp.Or(rule.why, "compared as it is"), shown.String()))
		}
	}
	return diffs
}

// absent is how differences shows, and compares, a field a face does not carry.
const absent = "(absent)"

func quoteOrAbsent(v string, there bool) string {
	if !there {
		return absent
	}
	return strconv.Quote(v)
}

// seen is one face's value of a field, with what a rule may need to compare it: the face, its
// whole record, and the names of its run.
type seen struct {
	face, value string
	rec         record
	run         []string
}

// fieldRule is how the differential check compares one field: same maps each face's value to
// what must be equal on every face; why says why the value itself may differ.
type fieldRule struct {
	same func(seen) string
	why  string
}

// asItIs is the default: the value itself.
func asItIs(s seen) string { return strconv.Quote(s.value) }

// presence: whether the face has a value, not which.
func presence(s seen) string {
	if s.value == "" {
		return "(empty)"
	}
	return "(a value)"
}

// number: empty, or a number, not which.
func number(s seen) string {
	if _, err := strconv.ParseFloat(s.value, 64); err == nil {
		return "(a number)"
	}
	return asItIs(s)
}

// zeroOrMore: zero, or more than zero, not how much more.
func zeroOrMore(s seen) string {
	if f, err := strconv.ParseFloat(s.value, 64); err == nil {
		if f == 0 {
			return "(zero)"
		}
		return "(more than zero)"
	}
	return asItIs(s)
}

// What a message may say otherwise on each face, in the order inTheRunsNames puts it.
var (
	// faceInstall is the rules a face's install gives, which a refused step names for its fix
	// (lifecycle.Runner's RBAC: the CLI's Role in docs/cli.md, each plugin's manifests).
	faceInstall = regexp.MustCompile(`install gives \([^()]*\)`)
	// trainJobName is a name trainstep gives a TrainJob, a prefix and 12 hex digits of the step's
	// identity (trainjob.Identity.Name), and the names made of it (its pods, Jobs and Workload):
	// a message names a TrainJob trainstep may not create, which has no trainjob-name.
	trainJobName = regexp.MustCompile(`[-a-z0-9]*-[0-9a-f]{12}\b[-a-z0-9]*`)
	// nodeOfAPod is how a message names one of the run's pods: its role, index and name.
	nodeOfAPod = regexp.MustCompile(`\b(node|[a-z]+-initializer) \d+ \(pod <name>\)`)
	// nodesAvailable is the scheduler's account of the cluster's Nodes in a pod's FailedScheduling
	// reason, one sentence ("0/4 nodes are available: 4 Insufficient nvidia.com/gpu. ").
	nodesAvailable = regexp.MustCompile(`\d+/\d+ nodes are available: .*?\.(\s|$)`)
)

// inTheRunsNames: the message with the rules of the face's install put as <install>; what names
// the face's run as <name> (its namespace, queue, Node and refusing policy, its TrainJob and its
// pods, Jobs and Workload named after it); which of its nodes a pod is as <i> (the first to fail
// of two that fail); and the scheduler's account of the cluster's Nodes as <nodes> (a scenario's
// own Node, made, cordoned and deleted while the table runs, is in it or not). That the pod did
// not fit for the reason the scenario makes is check's, on every face.
func inTheRunsNames(s seen) string {
	v := faceInstall.ReplaceAllString(s.value, "install gives (<install>)")
	for _, n := range s.run {
		if n != "" {
			// The name whole, in a word of name characters (a pod's name holds its job's), never
			// inside one: Argo's namespace ml is not the "ml" of "yaml".
			v = regexp.MustCompile(`[-a-z0-9]*\b`+regexp.QuoteMeta(n)+`\b[-a-z0-9]*`).ReplaceAllString(v, "<name>")
		}
	}
	v = trainJobName.ReplaceAllString(v, "<name>")
	v = nodeOfAPod.ReplaceAllString(v, "$1 <i> (pod <name>)")
	return strconv.Quote(nodesAvailable.ReplaceAllString(v, "<nodes>.$1"))
}

// runNames are the names of a face's run that a message may hold and another face's run names
// otherwise, the longest first (so a name that holds another is put whole).
func runNames(got result) []string {
	names := []string{got.outputs[trainjob.OutName], got.outputs[trainjob.OutCachedFrom]}
	if r := got.step; r != nil {
		names = append(names, r.ns, r.queue, r.node, r.deny, r.previous)
	}
	slices.SortFunc(names, func(a, b string) int { return len(b) - len(a) })
	return names
}

// tektonsOwnReason: a CustomRun's reason is Tekton's own where the core's is elsewhere: a success
// says Succeeded, as Tekton's TaskRuns do (the core's reason is the reason result, compared as
// such). A cancelled run's CustomRunCancelled is not compared: of a stopped step only the phase is
// (carried).
func tektonsOwnReason(s seen) string {
	if s.face == (tektonFace{}).name() && s.rec[facePhase] == "Succeeded" && s.value == tekton.ReasonSucceeded {
		s.value = s.rec[trainjob.OutReason]
	}
	return asItIs(s)
}

// carried says whether a face carries a field it has: every field, but for the empty values that
// stand for none. An Argo step has the result-<key> outputs its Workflow declares, empty when the
// step's result has no such key (the plugin answers every declared name; the scenarios' Workflows
// declare those any scenario returns, declaredOutputs), where the CLI and Tekton faces have the
// keys the result has. And of a step its engine stopped only the phase is compared: its outputs,
// which nothing downstream runs to read, are what its engine kept. The CLI writes none when
// interrupted and a CustomRun cancelled before an attempt ended has no results, but Argo's
// controller keeps a stopped node's outputs as the plugin's last reply left them: empty while
// the step ran, the failed job's (reason Retrying) while a retry waited out its backoff.
func carried(face string, rec record, field string) bool {
	switch {
	case rec[facePhase] == stopped:
		return field == facePhase
	case rec[field] != "" || field == facePhase || field == faceReason:
		return true
	case face == (argoFace{}).name():
		return !trainjob.IsResultKeyOutput(field)
	}
	return true
}

// differsByFace is every field the differential check does not compare as it is, with how it
// compares it instead and why: with carried, the one place that says where the faces may differ.
// Every other field of a record, every output and the face's phase and reason, must be equal on
// every face that ran the scenario, and a new output is compared as it is until this table says
// otherwise.
var differsByFace = map[string]fieldRule{
	faceReason: {same: tektonsOwnReason, why: "Tekton's own reason for a success"},
	// The run's names: each face's step has a TrainJob of its own, in a namespace of its own
	// (Argo's one namespace is shared by its Workflows).
	trainjob.OutName:       {same: presence, why: "names the run's TrainJob"},
	trainjob.OutNamespace:  {same: presence, why: "names the run's namespace"},
	trainjob.OutCachedFrom: {same: presence, why: "names the earlier run's TrainJob"},
	trainjob.OutMessage:    {same: inTheRunsNames, why: "names the run's objects and the face's install"},
	// The run's times: each face's step ran at its own time for its own seconds, on a shared and
	// loaded stack. Each face's own are asserted beside its outputs: the buckets sum to
	// duration-seconds (checkCost), gpu-hours is the accelerators × training-seconds
	// (gpuHoursAre), lost-seconds counts the earlier attempts (lostAtLeast). Here only what does
	// not depend on the clock: whether there is a time, and whether earlier attempts lost any.
	// Not whether gpu-hours is zero: the output has three decimals, and a GPU step that trained
	// a second or two on one face and more on another rounds to 0 on the first alone.
	trainjob.OutStartTime:      {same: presence, why: "the run's time"},
	trainjob.OutCompletionTime: {same: presence, why: "the run's time"},
	trainjob.OutDuration:       {same: number, why: "the run's wall time"},
	trainjob.OutQueueWait:      {same: number, why: "the run's wall time"},
	trainjob.OutInitializing:   {same: number, why: "the run's wall time"},
	trainjob.OutTraining:       {same: number, why: "the run's wall time"},
	trainjob.OutLost:           {same: zeroOrMore, why: "the earlier attempts' wall time"},
	trainjob.OutGPUHours:       {same: number, why: "the run's accelerators × its training time"},
}

// TestTheDifferentialCheck: the check finds what differs between faces, and lets through only
// what differsByFace says may.
func TestTheDifferentialCheck(t *testing.T) {
	// of is a face's record of a step that succeeded as TrainJob tj, in namespace ns, with more.
	of := func(tj, ns string, more record) record {
		rec := record{facePhase: "Succeeded", faceReason: "AllJobsCompleted", trainjob.OutReason: "AllJobsCompleted",
			trainjob.OutName: tj, trainjob.OutNamespace: ns, trainjob.OutDuration: "11", trainjob.OutTraining: "6",
			trainjob.OutLost: "0", trainjob.OutGPUHours: "0.007", trainjob.OutProgress: "",
			trainjob.OutMessage: "node 1 (pod " + tj + "-node-0-1-m4g5k) failed: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu."}
		maps.Copy(rec, more)
		return rec
	}
	runs := map[string][]string{"cli": {"x7k2p-1424c130f461", "ns-a"}, "argo": {"conformance-jm7wb-aaee3f836a8b", "argo"},
		"tekton": {"run-train-a0402c9b5e7f", "ns-b"}}
	for _, tc := range []struct {
		name string
		argo record
		// differ is the fields found to differ.
		differ []string
	}{{
		name: "the same step in the run's own names and times",
		argo: of("conformance-jm7wb-aaee3f836a8b", "argo", record{trainjob.OutDuration: "8", trainjob.OutTraining: "3",
			trainjob.OutGPUHours: "0.003",
			trainjob.OutMessage: "node 0 (pod conformance-jm7wb-aaee3f836a8b-node-0-0-p8vmf) failed: " +
				"0/5 nodes are available: 1 node(s) were unschedulable, 4 Insufficient nvidia.com/gpu."}),
	}, {
		name:   "an output only one face has",
		argo:   of("conformance-jm7wb-aaee3f836a8b", "argo", record{"result-accuracy": "0.9"}),
		differ: []string{"result-accuracy"},
	}, {
		name: "an output Argo's Workflow declares and the step has no value for",
		argo: of("conformance-jm7wb-aaee3f836a8b", "argo", record{"result-accuracy": ""}),
	}, {
		name:   "a core output one face does not carry, though empty on the other",
		argo:   without(of("conformance-jm7wb-aaee3f836a8b", "argo", nil), trainjob.OutProgress),
		differ: []string{trainjob.OutProgress},
	}, {
		name:   "an output no rule names is compared as it is",
		argo:   of("conformance-jm7wb-aaee3f836a8b", "argo", record{trainjob.OutReason: "FailedJobs", facePhase: "Failed"}),
		differ: []string{facePhase, trainjob.OutReason},
	}, {
		name: "a name, a time or lost seconds on one face only",
		argo: of("conformance-jm7wb-aaee3f836a8b", "argo", record{trainjob.OutName: "", trainjob.OutDuration: "", trainjob.OutLost: "15",
			trainjob.OutGPUHours: "0"}),
		differ: []string{trainjob.OutDuration, trainjob.OutLost, trainjob.OutName},
	}, {
		name:   "a message worded otherwise",
		argo:   of("conformance-jm7wb-aaee3f836a8b", "argo", record{trainjob.OutMessage: "node 0 (pod conformance-jm7wb-aaee3f836a8b-node-0-0-p8vmf) failed"}),
		differ: []string{trainjob.OutMessage},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			recs := map[string]record{"cli": of("x7k2p-1424c130f461", "ns-a", nil), "argo": tc.argo}
			diffs := differences(recs, runs)
			var fields []string
			for _, d := range diffs {
				fields = append(fields, strings.Fields(d)[4])
			}
			assert.Equal(t, tc.differ, fields, "%s", strings.Join(diffs, "\n"))
		})
	}
	t.Run("Tekton's own reason for a success and a cancel", func(t *testing.T) {
		tk := of("run-train-a0402c9b5e7f", "ns-b", record{faceReason: tekton.ReasonSucceeded})
		assert.Empty(t, differences(map[string]record{"cli": of("x7k2p-1424c130f461", "ns-a", nil), "tekton": tk}, runs))
		tk[facePhase] = "Failed"
		assert.Len(t, differences(map[string]record{"cli": of("x7k2p-1424c130f461", "ns-a", nil), "tekton": tk}, runs), 2,
			"face.phase and face.reason")
		cancelled := record{facePhase: stopped, faceReason: tekton.ReasonCancelled}
		assert.Empty(t, differences(map[string]record{"cli": {facePhase: stopped, faceReason: ""}, "tekton": cancelled}, runs))
	})
	t.Run("a refusal names each face's install and a TrainJob not made", func(t *testing.T) {
		refused := func(install, ns, tj string) record {
			return record{trainjob.OutMessage: "trainstep may not create the TrainJob; grant it the rules trainstep's install gives (" +
				install + "): creating TrainJob " + ns + "/" + tj + ": this step may not create TrainJobs in " + ns}
		}
		assert.Empty(t, differences(map[string]record{
			"cli":  refused("the Role docs/cli.md lists for the step's ServiceAccount", "ns-a", "x7k2p-train-model-df75203b874c"),
			"argo": refused("manifests/argo/rbac.yaml: kubectl apply -f manifests/argo/rbac.yaml", "argo", "conformance-sm7ml-0b217c3f5247"),
		}, runs))
	})
	t.Run("no outputs of a stopped step", func(t *testing.T) {
		assert.Empty(t, differences(map[string]record{
			"cli":  {facePhase: stopped, faceReason: ""},
			"argo": {facePhase: stopped, faceReason: "", trainjob.OutPhase: "", trainjob.OutName: "", "result-loss": ""},
		}, runs))
		assert.Empty(t, differences(map[string]record{
			"cli": {facePhase: stopped, faceReason: ""},
			"argo": {facePhase: stopped, faceReason: lifecycle.ReasonRetrying, trainjob.OutPhase: "Pending", trainjob.OutReason: lifecycle.ReasonRetrying,
				trainjob.OutEvictions: "0"},
		}, runs), "what Argo kept of the last reply before the stop")
		diffs := differences(map[string]record{
			"cli":  {facePhase: stopped, faceReason: ""},
			"argo": {facePhase: "Failed", faceReason: ""},
		}, runs)
		require.NotEmpty(t, diffs)
		assert.Contains(t, diffs[0], "the faces differ in face.phase", "the phase is compared")
	})
	t.Run("a short name is not replaced inside a word", func(t *testing.T) {
		msg := func(ns string) record {
			return of("x7k2p-1424c130f461", ns, record{trainjob.OutMessage: "disrupted (stages/pod-fail.yaml) in " + ns})
		}
		assert.Empty(t, differences(map[string]record{"cli": msg("ns-a"), "argo": msg("ml")}, map[string][]string{
			"cli": {"x7k2p-1424c130f461", "ns-a"}, "argo": {"x7k2p-1424c130f461", "ml"}}))
	})
	t.Run("one face alone", func(t *testing.T) {
		assert.Empty(t, differences(map[string]record{"cli": of("x7k2p-1424c130f461", "ns-a", nil)}, runs))
	})
}

func without(rec record, field string) record {
	delete(rec, field)
	return rec
}
