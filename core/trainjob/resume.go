package trainjob

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
)

// Output names of a step that may resume from a checkpoint (docs/resume.md). A face that knows
// the attempt sets Observation.Attempt, and then both are outputs; the others leave them out,
// so they are not in OutputNames (which every face always writes).
const (
	// OutAttempt is the retry attempt the step ran as, from 0.
	OutAttempt = "attempt"
	// OutResumedFrom is the checkpoint the command script offered the function
	// (TRAINSTEP_RESUME_FROM); empty when there was none.
	OutResumedFrom = "resumed-from"
)

// ResumeOutputNames lists the resume outputs, in their stable order after OutputNames.
var ResumeOutputNames = []string{OutAttempt, OutResumedFrom}

var checkpointName = regexp.MustCompile(`^(?:step|checkpoint)-(\d+)$`)

// CheckpointStep is the training step a checkpoint directory was saved at: N of step-N (the
// command script's save_checkpoint) or checkpoint-N (Hugging Face's Trainer).
func CheckpointStep(dir string) (int, bool) {
	m := checkpointName.FindStringSubmatch(path.Base(dir))
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}

// ResumeNote says what a resumed step resumed from ("resumed from step 400 (attempt 2)"); empty
// when it did not resume.
func (o Observation) ResumeNote() string {
	if o.ResumedFrom == "" {
		return ""
	}
	from := o.ResumedFrom
	if n, ok := CheckpointStep(from); ok {
		from = "step " + strconv.Itoa(n)
	}
	if o.Attempt == nil {
		return "resumed from " + from
	}
	return fmt.Sprintf("resumed from %s (attempt %d)", from, *o.Attempt)
}

// resumeOutputs adds the resume outputs when the face knows the attempt.
func (o Observation) resumeOutputs(out map[string]string) {
	if o.Attempt == nil {
		return
	}
	out[OutAttempt] = strconv.Itoa(*o.Attempt)
	out[OutResumedFrom] = o.ResumedFrom
}
