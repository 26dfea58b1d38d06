package step

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Retry asks trainstep to run the step again itself when it fails for a cause that retrying can
// help (a retryable failure class: docs/failures.md), as a new TrainJob that resumes from the
// step's checkpoint. It suits engines whose own retries cannot look at the cause (Tekton's
// retries); the engine's retries still apply on top, each with its own trainstep retries.
type Retry struct {
	// Limit is how many times the step is run again after its first TrainJob: 1 to MaxRetries.
	Limit int `json:"limit"`
	// Backoff is how long after a failed TrainJob ended the next one is created; 0 (the
	// default) is at once. A job trainstep itself ended at a deadline (startTimeout,
	// hangTimeout) is retried at once: its deadline was the wait.
	Backoff *Duration `json:"backoff,omitempty"`
}

// MaxRetries bounds retry.limit: each retry is a TrainJob, and a cause that ten new jobs did not
// mend is not passing.
const MaxRetries = 10

// Validate checks the block.
func (r *Retry) Validate(p *field.Path) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	if r.Limit < 1 || r.Limit > MaxRetries {
		errs = append(errs, field.Invalid(p.Child("limit"), r.Limit, fmt.Sprintf(
			"must be 1 to %d: how many times trainstep runs the step again after a retryable failure; to never retry, remove the retry block", MaxRetries)))
	}
	if r.Backoff != nil && r.Backoff.Duration < 0 {
		errs = append(errs, field.Invalid(p.Child("backoff"), r.Backoff.String(), "must not be negative, such as 30s; 0 retries at once"))
	}
	return errs
}

// RetryLimit is how many times trainstep retries the step itself: 0 without a retry block.
func (s *Spec) RetryLimit() int {
	if s == nil || s.Retry == nil {
		return 0
	}
	return s.Retry.Limit
}
