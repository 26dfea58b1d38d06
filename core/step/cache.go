package step

import (
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Cache opts a step into the step cache (docs/cache.md): a step whose TrainJob, as it would be
// submitted, is the same as one that succeeded in the namespace within MaxAge is not trained
// again; it returns that job's outputs.
type Cache struct {
	// MaxAge is how old a stored result may be and still be used.
	MaxAge *Duration `json:"maxAge,omitempty"`
	// Salt enters the key: what decides the training that trainstep cannot see in the TrainJob
	// (a dataset version behind a fixed URI). Change it to train again.
	Salt string `json:"salt,omitempty"`
	// Refresh trains again, whatever is stored, and stores the new result in its place.
	Refresh bool `json:"refresh,omitempty"`
}

// MaxSalt is the longest cache.salt: a version string, not data.
const MaxSalt = 1024

// Validate checks the block.
func (c *Cache) Validate(p *field.Path) field.ErrorList {
	if c == nil {
		return nil
	}
	var errs field.ErrorList
	switch {
	case c.MaxAge == nil:
		errs = append(errs, field.Required(p.Child("maxAge"), "how old a stored result may be and still be used, such as 24h or 168h"))
	case c.MaxAge.Duration <= 0:
		errs = append(errs, field.Invalid(p.Child("maxAge"), c.MaxAge.String(), "must be more than 0, such as 24h; to train every time, remove the cache block"))
	case c.MaxAge.Duration < time.Second:
		errs = append(errs, field.Invalid(p.Child("maxAge"), c.MaxAge.String(), "must be a second or more (stored results are timed in seconds), such as 24h"))
	}
	if len(c.Salt) > MaxSalt {
		errs = append(errs, field.TooLong(p.Child("salt"), "", MaxSalt))
	}
	return errs
}
