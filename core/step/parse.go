package step

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Parse reads a step from YAML or JSON. A wrong apiVersion or kind is refused first, alone (the
// rest is then no step); then unknown keys, duplicate keys and values of the wrong type are
// refused by name. Nothing about the trainer's own fields is checked here (the registered
// trainer does that).
func Parse(data []byte) (*Spec, error) {
	js, errs := toJSON(data)
	if len(errs) > 0 {
		return nil, Invalid(errs)
	}
	if strings.TrimSpace(string(js)) == "null" {
		return nil, Invalid(field.ErrorList{field.Required(field.NewPath("trainer"), "the step is empty; see examples/steps for a complete one")})
	}
	if errs := headerErrors(js); len(errs) > 0 {
		return nil, Invalid(errs)
	}
	var s Spec
	if errs := DecodeStrict(js, &s, nil); len(errs) > 0 {
		return nil, Invalid(errs)
	}
	return &s, nil
}

// InvalidError is bad input: every problem, each on the user's own field path. Retrying cannot fix
// it, so faces fail the step at once and create nothing.
type InvalidError struct {
	Errs field.ErrorList
}

func (e *InvalidError) Error() string {
	if len(e.Errs) == 1 {
		return "invalid training step: " + ErrorText(e.Errs[0])
	}
	var b strings.Builder
	fmt.Fprintf(&b, "invalid training step (%d problems):", len(e.Errs))
	for _, fe := range e.Errs {
		b.WriteString("\n  - ")
		b.WriteString(ErrorText(fe))
	}
	return b.String()
}

// ErrorText is fe.Error() without a "<nil>: " when the problem is the whole step.
func ErrorText(fe *field.Error) string {
	if fe.Field == "" || fe.Field == "<nil>" {
		return fe.ErrorBody()
	}
	return fe.Error()
}

// Invalid wraps a non-empty error list; it returns nil for an empty one.
func Invalid(errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return &InvalidError{Errs: errs}
}

// IsInvalid tells bad input from every other failure.
func IsInvalid(err error) bool {
	var ie *InvalidError
	return errors.As(err, &ie)
}
