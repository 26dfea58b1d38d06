package step

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxNamePrefix is the longest namePrefix, a trailing dash not counted. A TrainJob's name is
// <prefix>-<12 hex characters of the step's identity> and at most 33 characters
// (trainjob.MaxNameLength: JobSet names its pods after it and refuses pod names past 63).
const MaxNamePrefix = 20

// ValidateNamePrefix checks a namePrefix: a DNS-1035 label (the TrainJob's name is one) of at
// most MaxNamePrefix characters. One trailing dash is taken and dropped, as a habit from
// metadata.generateName: trainstep puts the dash before the hash itself.
func ValidateNamePrefix(prefix string, p *field.Path) field.ErrorList {
	if prefix == "" {
		return nil
	}
	bare := strings.TrimSuffix(prefix, "-")
	if len(bare) > MaxNamePrefix {
		return field.ErrorList{field.Invalid(p, prefix, fmt.Sprintf(
			"must be at most %d characters (has %d): trainstep appends -<12 hex characters of the step's identity>, and JobSet's pod names leave a TrainJob's name 33",
			MaxNamePrefix, len(bare)))}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1035Label(bare) {
		errs = append(errs, field.Invalid(p, prefix, fmt.Sprintf("%s; the TrainJob is named <namePrefix>-<12 hex characters>, so write a prefix such as finetune-llama", msg)))
	}
	return errs
}
