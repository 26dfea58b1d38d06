package trainjob

import (
	"encoding/json"
	"strconv"
	"time"
)

// Output names: stable, documented in the README, valid as Argo parameter and Tekton result names.
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
)

// OutputNames lists every output, in a stable order.
var OutputNames = []string{OutName, OutNamespace, OutRuntime, OutFramework, OutPhase, OutReason, OutMessage,
	OutStartTime, OutCompletionTime, OutDuration, OutNumNodes, OutProgress, OutMetrics}

// Outputs renders the observation as the step's outputs. Every name is always present (empty
// when unknown), so downstream steps can rely on them.
func (o Observation) Outputs() map[string]string {
	out := map[string]string{
		OutName:      o.Name,
		OutNamespace: o.Namespace,
		OutRuntime:   o.Runtime,
		OutFramework: o.Framework,
		OutPhase:     string(o.Phase),
		OutReason:    o.Reason,
		OutMessage:   o.Message,
		OutNumNodes:  strconv.Itoa(int(o.NumNodes)),
	}
	if o.StartTime != nil {
		out[OutStartTime] = o.StartTime.UTC().Format(time.RFC3339)
	}
	if o.CompletionTime != nil {
		out[OutCompletionTime] = o.CompletionTime.UTC().Format(time.RFC3339)
		if o.StartTime != nil {
			out[OutDuration] = strconv.FormatFloat(o.CompletionTime.Sub(*o.StartTime).Seconds(), 'f', 0, 64)
		}
	}
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
	return out
}
