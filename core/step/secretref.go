package step

import (
	"bytes"
	"encoding/json"
	"reflect"
)

// SecretRef names a Secret in the step's namespace. It is written either as the name alone
// (secretRef: hf-token, trainstep's first shape) or as {name: hf-token}, the Trainer CRD's
// LocalObjectReference a user copies from a TrainJob; both decode to the same Name.
type SecretRef struct {
	Name string `json:"name"`
}

var secretRefType = reflect.TypeOf(SecretRef{})

// UnmarshalJSON takes a string or an object. The object's keys were already checked by
// DecodeStrict (SecretRef is a shorthand struct), so an unknown one is named there.
func (r *SecretRef) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) > 0 && b[0] == '"':
		return json.Unmarshal(b, &r.Name)
	case len(b) > 0 && b[0] == '{':
		type plain SecretRef // no UnmarshalJSON: no recursion
		return json.Unmarshal(b, (*plain)(r))
	}
	return &json.UnmarshalTypeError{Value: string(b), Type: secretRefType}
}

// MarshalJSON writes the shorter shape, the name alone.
func (r SecretRef) MarshalJSON() ([]byte, error) { return json.Marshal(r.Name) }

// shorthand marks a struct that also takes a scalar shorthand: DecodeStrict checks its object
// form key by key like any struct, though it decodes itself.
func (*SecretRef) shorthand() {}
