// Package v1beta1 holds trainstep's own copy of the parts of Tekton's tekton.dev/v1beta1 CustomRun
// that the custom task contract uses. The contract is the JSON and the customruns/status
// subresource, not Tekton's Go types: importing those would drag knative (over 600 packages)
// into the executor. types_test.go proves the copy against Tekton's own types.
package v1beta1

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is Tekton's API group at the only version CustomRun is served in.
var GroupVersion = schema.GroupVersion{Group: "tekton.dev", Version: "v1beta1"}

// TektonRelease is the github.com/tektoncd/pipeline version whose types types_test.go proves this
// copy against (go.mod's; TestTektonReleaseIsGoModsTekton keeps the two equal). `executor
// version` and the image's labels report it, since the executor links no Tekton module to read
// it from.
const TektonRelease = "v1.3.0"

// Spec status values and messages Tekton writes (pipelinerun cancel.go and timeout.go).
const (
	SpecStatusCancelled     = "RunCancelled"
	CancelledByPipelineMsg  = "CustomRun cancelled as the PipelineRun it belongs to has been cancelled."
	TimedOutByPipelineMsg   = "CustomRun cancelled as the PipelineRun it belongs to has timed out."
	ConditionSucceeded      = "Succeeded"
	DefaultTimeoutMinutes   = 60
	ReasonCustomRunCanceled = "CustomRunCancelled" // Tekton matches this exact string
	ReasonCustomRunTimedOut = "CustomRunTimedOut"
)

// CustomRun is a tekton.dev/v1beta1 CustomRun.
type CustomRun struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              CustomRunSpec   `json:"spec,omitempty"`
	Status            CustomRunStatus `json:"status,omitempty"`
}

// CustomRunList is a list of CustomRuns.
type CustomRunList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CustomRun `json:"items"`
}

// CustomRunSpec is what Tekton's PipelineRun controller (or a user) asks for.
type CustomRunSpec struct {
	CustomRef          *TaskRef               `json:"customRef,omitempty"`
	CustomSpec         *EmbeddedCustomRunSpec `json:"customSpec,omitempty"`
	Params             []Param                `json:"params,omitempty"`
	Status             string                 `json:"status,omitempty"`
	StatusMessage      string                 `json:"statusMessage,omitempty"`
	Retries            int                    `json:"retries,omitempty"`
	ServiceAccountName string                 `json:"serviceAccountName"`
	Timeout            *metav1.Duration       `json:"timeout,omitempty"`
	Workspaces         []json.RawMessage      `json:"workspaces,omitempty"`
}

// TaskRef names the custom task. Only APIVersion and Kind matter to trainstep.
type TaskRef struct {
	Name       string          `json:"name,omitempty"`
	Kind       string          `json:"kind,omitempty"`
	APIVersion string          `json:"apiVersion,omitempty"`
	Bundle     string          `json:"bundle,omitempty"`
	Resolver   string          `json:"resolver,omitempty"`
	Params     json.RawMessage `json:"params,omitempty"`
}

// EmbeddedCustomRunSpec is a custom task spelled out inline (a PipelineTask's taskSpec).
type EmbeddedCustomRunSpec struct {
	runtime.TypeMeta `json:",inline"`
	Metadata         EmbeddedMetadata     `json:"metadata"`
	Spec             runtime.RawExtension `json:"spec,omitempty"`
}

// EmbeddedMetadata is the labels and annotations an embedded custom task may carry.
type EmbeddedMetadata struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Param is one parameter; its value is a string, an array of strings or an object of strings.
type Param struct {
	Name  string     `json:"name"`
	Value ParamValue `json:"value"`
}

// ParamType tells which of ParamValue's fields is set.
type ParamType string

// Param types, as Tekton names them.
const (
	ParamTypeString ParamType = "string"
	ParamTypeArray  ParamType = "array"
	ParamTypeObject ParamType = "object"
)

// ParamValue is Tekton's string | []string | map[string]string value.
type ParamValue struct {
	Type      ParamType
	StringVal string
	ArrayVal  []string
	ObjectVal map[string]string
}

// UnmarshalJSON reads whichever of the three shapes is there.
func (p *ParamValue) UnmarshalJSON(b []byte) error {
	*p = ParamValue{}
	if len(b) == 0 || string(b) == "null" {
		p.Type = ParamTypeString
		return nil
	}
	switch b[0] {
	case '[':
		p.Type = ParamTypeArray
		return json.Unmarshal(b, &p.ArrayVal)
	case '{':
		p.Type = ParamTypeObject
		return json.Unmarshal(b, &p.ObjectVal)
	}
	p.Type = ParamTypeString
	return json.Unmarshal(b, &p.StringVal)
}

// MarshalJSON writes the value in its own shape.
func (p ParamValue) MarshalJSON() ([]byte, error) {
	switch p.Type {
	case ParamTypeArray:
		if p.ArrayVal == nil {
			return []byte("[]"), nil
		}
		return json.Marshal(p.ArrayVal)
	case ParamTypeObject:
		if p.ObjectVal == nil {
			return []byte("{}"), nil
		}
		return json.Marshal(p.ObjectVal)
	}
	return json.Marshal(p.StringVal)
}

// Condition is a knative apis.Condition.
type Condition struct {
	Type               string                 `json:"type"`
	Status             corev1.ConditionStatus `json:"status"`
	Severity           string                 `json:"severity,omitempty"`
	LastTransitionTime metav1.Time            `json:"lastTransitionTime,omitempty"`
	Reason             string                 `json:"reason,omitempty"`
	Message            string                 `json:"message,omitempty"`
}

// CustomRunStatus is what the custom task controller writes, through customruns/status.
type CustomRunStatus struct {
	ObservedGeneration int64                `json:"observedGeneration,omitempty"`
	Conditions         []Condition          `json:"conditions,omitempty"`
	Annotations        map[string]string    `json:"annotations,omitempty"`
	StartTime          *metav1.Time         `json:"startTime,omitempty"`
	CompletionTime     *metav1.Time         `json:"completionTime,omitempty"`
	Results            []CustomRunResult    `json:"results,omitempty"`
	RetriesStatus      []CustomRunStatus    `json:"retriesStatus,omitempty"`
	ExtraFields        runtime.RawExtension `json:"extraFields,omitempty"`
}

// CustomRunResult is one result; Tekton reads only string values.
type CustomRunResult struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Succeeded returns the Succeeded condition, or nil.
func (s *CustomRunStatus) Succeeded() *Condition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == ConditionSucceeded {
			return &s.Conditions[i]
		}
	}
	return nil
}

// SetSucceeded sets the Succeeded condition, keeping its transition time unless the status flips.
func (s *CustomRunStatus) SetSucceeded(c Condition) {
	c.Type = ConditionSucceeded
	if old := s.Succeeded(); old != nil {
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		*old = c
		return
	}
	s.Conditions = append(s.Conditions, c)
}

// IsCancelled reports whether Tekton (or a user) asked the run to stop.
func (r *CustomRun) IsCancelled() bool { return r.Spec.Status == SpecStatusCancelled }

// RefersTo reports whether the run's customRef or customSpec names apiVersion and kind: the
// semantics of Tekton's FilterCustomRunRef.
func (r *CustomRun) RefersTo(apiVersion, kind string) bool {
	if ref := r.Spec.CustomRef; ref != nil {
		return ref.APIVersion == apiVersion && ref.Kind == kind
	}
	if cs := r.Spec.CustomSpec; cs != nil {
		return cs.APIVersion == apiVersion && cs.Kind == kind
	}
	return false
}

// DeepCopyObject implements runtime.Object through a JSON round trip: the types are all JSON
// values, so the copy is exact, and there is no generated code to keep in step.
func (r *CustomRun) DeepCopyObject() runtime.Object { return r.DeepCopy() }

// DeepCopy copies the run.
func (r *CustomRun) DeepCopy() *CustomRun {
	if r == nil {
		return nil
	}
	out := &CustomRun{}
	jsonCopy(r, out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *CustomRunList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &CustomRunList{}
	jsonCopy(l, out)
	return out
}

func jsonCopy(in, out any) {
	b, err := json.Marshal(in)
	if err != nil {
		panic("copying a CustomRun: " + err.Error()) // every field is a JSON value
	}
	if err := json.Unmarshal(b, out); err != nil {
		panic("copying a CustomRun: " + err.Error())
	}
}

// AddToScheme registers CustomRun and CustomRunList under tekton.dev/v1beta1.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &CustomRun{}, &CustomRunList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
