// Package trainjob turns a planned step into a Kubeflow Trainer TrainJob and sees it through:
// a deterministic identity, create-or-get submission, a watch-based wait and the step's outputs.
package trainjob

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/trainstep/trainstep/core/step"
)

// Identity is who a TrainJob belongs to: the engine, the run that owns the step (an Argo
// Workflow UID, a Tekton CustomRun UID, …), the step within it and the attempt. The same identity
// always names the same TrainJob, so a replayed or restarted step finds its job instead of
// starting a second one, and a retry (a new attempt) gets a fresh one.
type Identity struct {
	Engine   string
	OwnerUID string
	StepKey  string
	Attempt  int
	// EngineAttempt, when the step retries itself (a retry block), is the engine's attempt the
	// TrainJob attempt Attempt is one of (lifecycle numbers them: engine attempt × (limit+1) +
	// retry). Nil when they are the same. It is not part of the hash: it labels the job
	// (LabelEngineAttempt) for whoever maps it back to the engine's node, the Argo janitor.
	EngineAttempt *int
	// Run, when the engine restarts a finished run in place (Argo's `argo retry` keeps the workflow
	// UID, the node names and resets {{retries}}), tells one incarnation of the run from the next.
	// Empty for engines that need none: the identity, name and labels are then what they were
	// before Run existed.
	Run string
	// RunStarted, with Run, is when this incarnation of the run began (Argo: status.startedAt). A
	// TrainJob made by a release before Run existed carries no run, so it is this incarnation's
	// only if it was created since; zero means no such job is adopted (see Adopts).
	RunStarted time.Time
	// Owner, when the face has one, makes the TrainJob go when its owner goes.
	Owner *metav1.OwnerReference
	// NamePrefix is the step's namePrefix: when set it replaces the prefix Name makes from the
	// step key. It is not part of the hash or the labels: it changes how the job reads, not whose
	// it is, so a step whose prefix changed still finds its job (by its labels).
	NamePrefix string
}

// Validate reports a missing part; faces build identities, users do not, so this is a bug check.
func (id Identity) Validate() error {
	switch {
	case id.Engine == "":
		return fmt.Errorf("identity has no engine")
	case id.OwnerUID == "":
		return fmt.Errorf("identity has no owner UID")
	case id.StepKey == "":
		return fmt.Errorf("identity has no step key")
	case id.Attempt < 0:
		return fmt.Errorf("identity has a negative attempt %d", id.Attempt)
	}
	return nil
}

func (id Identity) hash() string {
	parts := []string{id.Engine, id.OwnerUID, id.StepKey, strconv.Itoa(id.Attempt)}
	if id.Run != "" {
		parts = append(parts, id.Run)
	}
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:])
}

// MaxNameLength bounds every TrainJob name trainstep makes. The JobSet is named after the
// TrainJob and JobSet's webhook refuses one whose pod names <jobset>-<replicatedJob>-<jobIndex>-
// <podIndex>-xxxxx would pass 63 characters; the longest replicated job of any stock runtime of
// Trainer v2.0–v2.3 is dataset-initializer (19), so 63 - len("-dataset-initializer-0-0-xxxxx")
// = 33. Plan checks the actual runtime (PodNameRoom), for runtimes with longer names.
const MaxNameLength = 33

// hashLength is how much of the identity's hash a name carries: 48 bits, so two steps of one
// namespace collide with negligible odds, and a collision is caught by Owns (ErrNameTaken).
const hashLength = 12

// Name is a DNS-1035 label of at most MaxNameLength characters: a readable prefix and hashLength
// hex characters of the identity's hash. The prefix is the step's namePrefix (validated by
// step.ValidateNamePrefix, a trailing dash dropped) or else made from the step key: when the key
// is too long, whole leading segments go first, so the step's own name (the tail of an Argo node
// name such as train-dag-x7k2p.train) stays readable.
func (id Identity) Name() string {
	prefix := strings.TrimSuffix(id.NamePrefix, "-")
	if prefix == "" {
		prefix = namePrefix(id.StepKey, step.MaxNamePrefix)
	}
	return prefix + "-" + id.hash()[:hashLength]
}

func namePrefix(key string, limit int) string {
	prefix := strings.Trim(dashed(strings.ToLower(key)), "-")
	prefix = strings.TrimLeft(prefix, "0123456789-")
	for len(prefix) > limit {
		_, rest, found := strings.Cut(prefix, "-")
		if !found || rest == "" {
			prefix = strings.TrimRight(prefix[:limit], "-")
			break
		}
		prefix = strings.TrimLeft(rest, "0123456789-")
	}
	if prefix == "" {
		prefix = "trainjob"
	}
	return prefix
}

// dashed replaces each run of characters other than a-z and 0-9 with one dash.
func dashed(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	dash := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteByte(c)
			dash = false
			continue
		}
		if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	return b.String()
}

// Labels record the identity so a job can be recognised as ours.
func (id Identity) Labels() map[string]string {
	l := map[string]string{
		LabelManagedBy: ManagedByValue,
		LabelEngine:    labelValue(id.Engine),
		LabelOwnerUID:  labelValue(id.OwnerUID),
		LabelStep:      id.hash()[:16],
		LabelAttempt:   strconv.Itoa(id.Attempt),
	}
	if id.Run != "" {
		l[LabelRun] = labelValue(id.Run)
	}
	if id.EngineAttempt != nil {
		l[LabelEngineAttempt] = strconv.Itoa(*id.EngineAttempt)
	}
	return l
}

// AtRetry is the identity of TrainJob attempt attempt, made by the step's own retries within
// the engine's attempt engineAttempt.
func (id Identity) AtRetry(engineAttempt, attempt int) Identity {
	id.EngineAttempt, id.Attempt = &engineAttempt, attempt
	return id
}

// carries reports whether labels hold every one of Labels: Owns without building the map, for
// it runs on every status call of every step.
func (id Identity) carries(l map[string]string) bool {
	if l[LabelManagedBy] != ManagedByValue || l[LabelAttempt] != strconv.Itoa(id.Attempt) ||
		l[LabelStep] != id.hash()[:16] || l[LabelEngine] != labelValue(id.Engine) || l[LabelOwnerUID] != labelValue(id.OwnerUID) {
		return false
	}
	return id.Run == "" || l[LabelRun] == labelValue(id.Run)
}

// earlierLabels are the labels releases before Run existed (up to 1 Dec 2026) put on this step's
// TrainJob: the same labels without trainstep.dev/run, the step hash made without the run. For
// an identity without a Run they are its Labels.
func (id Identity) earlierLabels() map[string]string {
	id.Run = ""
	return id.Labels()
}

// Adopts reports whether an existing TrainJob, found by its labels rather than its name, is this
// step's: it carries this identity (made under a name an earlier release gave it: names were
// shortened on 1 Dec 2026), or it was made before Run existed, carries the identity without its
// run and was created once this incarnation of the run had begun (so `argo retry` still gets a
// fresh job, not the failed one of the run before).
func (id Identity) Adopts(tj metav1.Object) bool {
	if id.Owns(tj.GetLabels()) {
		return true
	}
	if id.Run == "" || id.RunStarted.IsZero() {
		return false
	}
	l := tj.GetLabels()
	if _, hasRun := l[LabelRun]; hasRun {
		return false
	}
	// The identity as an earlier release labelled it: no run (earlierLabels).
	before := id
	before.Run = ""
	if !before.carries(l) {
		return false
	}
	// Both times have one-second resolution (RFC 3339 in the API): a job created in the second
	// the run started belongs to it.
	return !tj.GetCreationTimestamp().Time.Before(id.RunStarted.Truncate(time.Second))
}

// Annotations keep the readable step key and owner.
func (id Identity) Annotations() map[string]string {
	return map[string]string{AnnotationStepKey: id.StepKey, AnnotationOwnerUID: id.OwnerUID}
}

// labelValue keeps a valid label value as it is and hashes anything else.
func labelValue(v string) string {
	if isLabelValue(v) {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "h-" + hex.EncodeToString(sum[:])[:40]
}

// Owns reports whether the labels of an existing TrainJob carry this identity.
func (id Identity) Owns(labels map[string]string) bool {
	return id.carries(labels)
}

// isLabelValue is validation.IsValidLabelValue without its regular expression (it runs several
// times on every status call): at most 63 characters, empty or alphanumeric at both ends with
// alphanumerics, '-', '_' and '.' between.
func isLabelValue(v string) bool {
	if len(v) > validation.LabelValueMaxLength {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && ((c != '-' && c != '_' && c != '.') || i == 0 || i == len(v)-1) {
			return false
		}
	}
	return true
}
