package trainjob

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Output names: stable, documented in docs/outputs.md, valid as Argo parameter and Tekton result names.
const (
	OutName           = "trainjob-name"
	OutNamespace      = "trainjob-namespace"
	OutRuntime        = "runtime"
	OutFramework      = "framework"
	OutPhase          = "phase"
	OutReason         = "reason"
	OutMessage        = "message"
	OutStartTime      = "start-time"
	OutCompletionTime = "completion-time"
	OutDuration       = "duration-seconds"
	OutNumNodes       = "num-nodes"
	OutProgress       = "progress-percentage"
	OutMetrics        = "metrics"
	// OutResult is the training function's return value on rank 0, as JSON.
	OutResult = "result"
	// OutQueueWait is the seconds from the TrainJob's creation to its last resume (Kueue's last
	// admission); empty when it was never suspended. OutPreemptions and OutEvictions count
	// Kueue's preemptions and evictions of any reason.
	OutQueueWait   = "queue-wait-seconds"
	OutPreemptions = "preemptions"
	OutEvictions   = "evictions"
	// OutCluster is the MultiKueue worker cluster that ran the job (empty when it ran here);
	// OutUndelivered lists what a step on a MultiKueue manager cannot deliver (Undelivered).
	OutCluster     = "cluster"
	OutUndelivered = "undelivered"
	// OutFailureClass is why a failed step failed (FailureClass; empty when it did not fail), and
	// OutRetryable whether retrying it can help ("true" or "false"; empty when it did not fail).
	OutFailureClass = "failure-class"
	OutRetryable    = "retryable"
)

// ResultKeyPrefix names the output of one top-level key of a dict result: result-<key>. Argo
// parameter names allow only [-a-zA-Z0-9_] (no dots), Tekton result names must start and end with
// an alphanumeric, so a key becomes an output when it matches resultKeyName, and every such key
// does: a declared output is never left empty when the value has its key, and a face cannot
// always know what is declared (a Tekton CustomRun is not told). Their number is bounded by the
// result's own: at most 4096 bytes of JSON (trainers.MaxResult). Every key stays in result.
const ResultKeyPrefix = "result-"

var resultKeyName = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_]{0,61}[A-Za-z0-9])?$`)

// IsResultKeyOutput reports whether name is a result-<key> output name a step may declare.
func IsResultKeyOutput(name string) bool {
	key, ok := strings.CutPrefix(name, ResultKeyPrefix)
	return ok && resultKeyName.MatchString(key)
}

// OrderedNames lists outs in a stable order: OutputNames, the resume and cache outputs when
// there, then the result-<key> outputs sorted.
func OrderedNames(outs map[string]string) []string {
	names := slices.Clone(OutputNames)
	for _, n := range slices.Concat(ResumeOutputNames, CacheOutputNames) {
		if _, ok := outs[n]; ok {
			names = append(names, n)
		}
	}
	var extra []string
	for n := range outs {
		if !slices.Contains(names, n) {
			extra = append(extra, n)
		}
	}
	sort.Strings(extra)
	return append(names, extra...)
}

// resultKeys renders result-<key> for each top-level key of a JSON object.
func resultKeys(result string, out map[string]string) {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(result), &obj) != nil {
		return
	}
	for k, v := range obj {
		if !resultKeyName.MatchString(k) {
			continue
		}
		var s string
		if bytes.HasPrefix(bytes.TrimSpace(v), []byte(`"`)) && json.Unmarshal(v, &s) == nil {
			out[ResultKeyPrefix+k] = s // a string as itself, not quoted
			continue
		}
		var b bytes.Buffer
		if json.Compact(&b, v) == nil {
			out[ResultKeyPrefix+k] = b.String()
		}
	}
}

// OutputNames lists every output, in a stable order.
var OutputNames = []string{OutName, OutNamespace, OutRuntime, OutFramework, OutPhase, OutReason, OutMessage,
	OutStartTime, OutCompletionTime, OutDuration, OutNumNodes, OutProgress, OutMetrics, OutResult,
	OutQueueWait, OutPreemptions, OutEvictions, OutCluster, OutUndelivered, OutFailureClass, OutRetryable,
	OutInitializing, OutTraining, OutLost, OutGPUHours}

// Outputs renders the observation as the step's outputs. Every name is always present (empty
// when unknown), so downstream steps can rely on them.
func (o Observation) Outputs() map[string]string {
	out := map[string]string{
		OutName:        o.Name,
		OutNamespace:   o.Namespace,
		OutRuntime:     o.Runtime,
		OutFramework:   o.Framework,
		OutPhase:       string(o.Phase),
		OutReason:      o.Reason,
		OutMessage:     o.Message,
		OutNumNodes:    strconv.Itoa(int(o.NumNodes)),
		OutResult:      o.Result,
		OutPreemptions: strconv.Itoa(o.Preemptions),
		OutEvictions:   strconv.Itoa(o.Evictions),
		OutCluster:     o.Cluster,
		OutUndelivered: o.Undelivered,
	}
	if f := o.Failure; f != nil {
		out[OutFailureClass], out[OutRetryable] = string(f.Class), strconv.FormatBool(f.Retryable)
	}
	if o.QueueWait != nil {
		out[OutQueueWait] = strconv.FormatInt(seconds(*o.QueueWait), 10)
	}
	resultKeys(o.Result, out)
	o.metricOutputs(out)
	o.resumeOutputs(out)
	if o.StartTime != nil {
		out[OutStartTime] = o.StartTime.UTC().Format(time.RFC3339)
	}
	if o.CompletionTime != nil {
		out[OutCompletionTime] = o.CompletionTime.UTC().Format(time.RFC3339)
		if o.StartTime != nil {
			out[OutDuration] = strconv.FormatInt(seconds(o.CompletionTime.Sub(*o.StartTime)), 10)
		}
	}
	o.costOutputs(out)
	if o.Progress != nil {
		out[OutProgress] = strconv.Itoa(int(*o.Progress))
	}
	if len(o.Metrics) > 0 {
		b, _ := json.Marshal(o.Metrics) // map[string]string always marshals
		out[OutMetrics] = string(b)
	} else {
		out[OutMetrics] = "{}"
	}
	for _, n := range OutputNames {
		if _, ok := out[n]; !ok {
			out[n] = ""
		}
	}
	return o.cacheOutputs(out)
}
