package local

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainers"
	"github.com/trainstep/trainstep/core/trainjob"
)

// CheckpointRoot is where local checkpoints are kept unless a flag says otherwise:
// $XDG_STATE_HOME/trainstep/checkpoints, or ~/.local/state/trainstep/checkpoints. They are
// state, not cache: what a retried step resumes from.
func CheckpointRoot() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "trainstep", "checkpoints"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("finding where to keep local checkpoints (no $XDG_STATE_HOME, no home directory): %w; set --checkpoint-dir", err)
	}
	return filepath.Join(home, ".local", "state", "trainstep", "checkpoints"), nil
}

// CheckpointDir is one step's checkpoint directory under root: step.StepPath, <owner UID, or
// "local">/<step key>, as on a cluster's volume, the same for every attempt.
func CheckpointDir(root, ownerUID, stepKey string) string {
	return filepath.Join(root, filepath.FromSlash(step.StepPath(ownerUID, stepKey)))
}

// ContentKey is the step key of a step run with no --step-key: "step-" and 12 hex characters of
// a SHA-256 of the step as parsed, as canonical JSON (keys sorted, numbers as written). Rerunning
// the same step file finds the same directory and resumes; a step that trains something else (a
// changed model, dataset, function, argument, runtime or pod block) gets its own, so it never
// resumes another's checkpoint. What only bounds, names or labels the run is left out, so raising
// a timeout after one killed the step still resumes it. Every other field, including one added
// later, is in: a field wrongly in splits a directory, one wrongly out would mix two steps.
func ContentKey(spec *step.Spec) (string, error) {
	s := *spec
	s.APIVersion, s.Kind = "", ""
	s.Labels, s.Annotations, s.NamePrefix, s.QueueName = nil, nil, "", ""
	s.Timeout, s.KeepOnTimeout, s.StartTimeout, s.HangTimeout = nil, false, nil, nil
	s.Retry, s.Cache = nil, nil
	b, err := json.Marshal(&s)
	if err != nil {
		return "", fmt.Errorf("hashing the step for its local checkpoint directory: %w", err)
	}
	// The trainer's fields are kept as the file wrote them; decoded and written again, two files
	// that differ only in key order or spacing are the same step.
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return "", fmt.Errorf("hashing the step for its local checkpoint directory: %w", err)
	}
	if b, err = json.Marshal(v); err != nil {
		return "", fmt.Errorf("hashing the step for its local checkpoint directory: %w", err)
	}
	sum := sha256.Sum256(b)
	return fmt.Sprintf("step-%x", sum[:6]), nil
}

// checkpointEnv is what a node gets for its checkpoints besides the TrainJob's own env.
func (r *Runner) checkpointEnv() []string {
	env := []string{step.AttemptEnv + "=" + strconv.Itoa(r.Attempt)}
	if r.CheckpointDir != "" {
		env = append(env, step.CheckpointDirEnv+"="+r.CheckpointDir)
	}
	return env
}

// resumeWatch keeps the checkpoint rank 0 said it was offered, from any node's output.
type resumeWatch struct {
	mu   sync.Mutex
	path string
}

// saw records line's checkpoint if it is the first such line, and reports whether it was.
func (w *resumeWatch) saw(line string) bool {
	p, ok := strings.CutPrefix(line, trainers.ResumedFromLine)
	if !ok || p == "" {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.path != "" {
		return false
	}
	w.path = p
	return true
}

func (w *resumeWatch) from() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.path
}

// withResume is obs with the attempt and the checkpoint it resumed from: the local backend
// always knows its attempt, so its runs carry the resume outputs. The path from rank 0's log
// line wins over the name its progress reported (trainers.ResumedFromMetric), which Observe read.
func withResume(obs trainjob.Observation, attempt int, resumedFrom string) trainjob.Observation {
	obs.Attempt = &attempt
	if resumedFrom != "" {
		obs.ResumedFrom = resumedFrom
	}
	return obs
}
