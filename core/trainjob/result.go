package trainjob

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/core/trainers"
)

// ResultMarker wraps the return value in the termination message, so a message someone else
// wrote is never taken for a result: {"trainstep.dev/result": <value>}.
const ResultMarker = trainers.ResultMarker

// Reasons a step that trained fails because its result did not arrive whole.
const (
	// ReasonResultTruncated: the kubelet cut rank 0's termination message.
	ReasonResultTruncated = "ResultTruncated"
	// ReasonResultInvalid: the message has the result marker but is not a usable result.
	ReasonResultInvalid = "ResultInvalid"
)

// ResultMessage is what rank 0's termination message says of the return value.
type ResultMessage struct {
	// Value is the return value as compact JSON ("" when none was written).
	Value string
	// Unconverted names the values the script wrote as their repr() (no JSON form).
	Unconverted []string
	// ResumedFrom is the checkpoint the function was offered on this run ("" when none).
	ResumedFrom string
	// Reason and Problem say why a message that carries the marker is not a usable result (cut
	// by the kubelet, duplicate keys); both empty when it is.
	Reason, Problem string
}

// resultStart matches the start of every message the command script writes (marker first), so a
// message cut anywhere after it is still known for a result.
var resultStart = regexp.MustCompile(`^\s*\{\s*"` + regexp.QuoteMeta(ResultMarker) + `"\s*:`)

// ReadResult reads a termination message written by the command script; ok is false for a
// message that is not one (someone else's, or none). A message that starts like one but does
// not parse is a result that did not arrive whole: ok is true and Problem says so.
func ReadResult(msg string) (r ResultMessage, ok bool) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(msg), &m); err != nil {
		if !resultStart.MatchString(msg) {
			return ResultMessage{}, false
		}
		return ResultMessage{Reason: ReasonResultTruncated,
			Problem: fmt.Sprintf("the termination message is not whole JSON (%d bytes, %v)", len(msg), err)}, true
	}
	if from, has := m[trainers.ResumedFromMarker]; has {
		_ = json.Unmarshal(from, &r.ResumedFrom) // a note only, like the unconverted list
	}
	v, ok := m[ResultMarker]
	if !ok {
		// A function that returned None writes only what it resumed from.
		return ResultMessage{ResumedFrom: r.ResumedFrom}, r.ResumedFrom != ""
	}
	if dup := duplicateKey(v); dup != "" {
		return ResultMessage{Reason: ReasonResultInvalid, ResumedFrom: r.ResumedFrom,
			Problem: fmt.Sprintf("the return value has the key %q twice, so one value would be lost; give each key one value", dup)}, true
	}
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return ResultMessage{Reason: ReasonResultInvalid, ResumedFrom: r.ResumedFrom, Problem: fmt.Sprintf("the return value is not JSON: %v", err)}, true
	}
	r.Value = b.String()
	if u, has := m[trainers.UnconvertedMarker]; has {
		_ = json.Unmarshal(u, &r.Unconverted) // a note only: a malformed one is not worth failing for
	}
	return r, true
}

// duplicateKey is the first object key that occurs twice in one object of the JSON value v
// (encoding/json would keep the last silently), or "".
func duplicateKey(v json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(v))
	var walk func() string
	walk = func() string {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return ""
				}
				k, _ := kt.(string)
				if seen[k] {
					return k
				}
				seen[k] = true
				if d := walk(); d != "" {
					return d
				}
			}
			_, _ = dec.Token()
		case json.Delim('['):
			for dec.More() {
				if d := walk(); d != "" {
					return d
				}
			}
			_, _ = dec.Token()
		}
		return ""
	}
	return walk()
}

// podResult is the first result a trainer container left in its termination message (rank 0
// runs in one of them: node-0, or on MPI wherever mpirun placed it). A cut message names the
// pod and the kubelet's rule for its container count.
func podResult(pods []corev1.Pod) ResultMessage {
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name != NodeContainer || cs.State.Terminated == nil {
				continue
			}
			r, ok := ReadResult(cs.State.Terminated.Message)
			if !ok {
				continue
			}
			if r.Problem != "" {
				r.Problem = fmt.Sprintf("pod %s's %s", p.Name, strings.TrimPrefix(r.Problem, "the "))
				if n := podContainers(&p); r.Reason == ReasonResultTruncated && n > 0 {
					r.Problem += fmt.Sprintf(": the kubelet keeps %d bytes of each container's termination message in a pod of %d containers (init, sidecar and ephemeral containers included; 12288 ÷ %d, at most 4096)",
						min(trainers.PodTerminationMessages/n, trainers.MaxResult), n, n)
				}
			}
			return r
		}
	}
	return ResultMessage{}
}

// podContainers is what the kubelet divides the pod's termination-message room by: its
// containers, init containers and ephemeral containers, counted from the spec or, on a trimmed
// pod (TrimPod keeps no spec), from the statuses the kubelet reports for each.
func podContainers(p *corev1.Pod) int {
	spec := len(p.Spec.Containers) + len(p.Spec.InitContainers) + len(p.Spec.EphemeralContainers)
	status := len(p.Status.ContainerStatuses) + len(p.Status.InitContainerStatuses) + len(p.Status.EphemeralContainerStatuses)
	return max(spec, status)
}

// WithResult records the return value. A step whose job completed but whose result did not
// arrive whole fails by name (a downstream step would otherwise read an empty result); values
// written as their repr() are named in the message.
func (o Observation) WithResult(r ResultMessage) Observation {
	o.Result = r.Value
	if r.ResumedFrom != "" {
		o.ResumedFrom = r.ResumedFrom
	}
	if o.Phase != PhaseSucceeded {
		return o
	}
	if r.Problem != "" {
		o.Phase, o.Reason = PhaseFailed, r.Reason
		o.Failure = Classified(ClassCode)
		o.Message = fmt.Sprintf("TrainJob %s completed, but the training function's return value was lost: %s", o.Name, r.Problem)
		if r.Reason == ReasonResultTruncated {
			o.Message += "; return less (write large values to storage and return their URI)"
		}
		return o
	}
	if len(r.Unconverted) > 0 {
		o.Message += "; warning: these values of the result have no JSON form and are their repr() strings: " + strings.Join(r.Unconverted, ", ")
	}
	return o
}
