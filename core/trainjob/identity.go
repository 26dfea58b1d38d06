// Package trainjob turns a planned step into a Kubeflow Trainer TrainJob and sees it through:
// a deterministic identity, create-or-get submission, a watch-based wait and the step's outputs.
package trainjob

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
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
	// Owner, when the face has one, makes the TrainJob go when its owner goes.
	Owner *metav1.OwnerReference
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
	sum := sha256.Sum256([]byte(strings.Join([]string{id.Engine, id.OwnerUID, id.StepKey, strconv.Itoa(id.Attempt)}, "\x00")))
	return hex.EncodeToString(sum[:])
}

var nonName = regexp.MustCompile(`[^a-z0-9]+`)

// Name is a DNS-1035 label of at most 63 characters: a readable prefix from the step key and 12
// hex characters of the identity's hash. Pods are named <name>-node-0-0-xxxxx, so the name is
// kept well under the limit.
func (id Identity) Name() string {
	prefix := strings.Trim(nonName.ReplaceAllString(strings.ToLower(id.StepKey), "-"), "-")
	prefix = strings.TrimLeft(prefix, "0123456789-")
	if len(prefix) > 28 {
		prefix = strings.TrimRight(prefix[:28], "-")
	}
	if prefix == "" {
		prefix = "trainjob"
	}
	return prefix + "-" + id.hash()[:12]
}

// Labels record the identity so a job can be recognised as ours.
func (id Identity) Labels() map[string]string {
	return map[string]string{
		LabelManagedBy: ManagedByValue,
		LabelEngine:    labelValue(id.Engine),
		LabelOwnerUID:  labelValue(id.OwnerUID),
		LabelStep:      id.hash()[:16],
		LabelAttempt:   strconv.Itoa(id.Attempt),
	}
}

// Annotations keep the readable step key and owner.
func (id Identity) Annotations() map[string]string {
	return map[string]string{AnnotationStepKey: id.StepKey, AnnotationOwnerUID: id.OwnerUID}
}

// labelValue keeps a valid label value as it is and hashes anything else.
func labelValue(v string) string {
	if len(validation.IsValidLabelValue(v)) == 0 {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "h-" + hex.EncodeToString(sum[:])[:40]
}

// Owns reports whether the labels of an existing TrainJob carry this identity.
func (id Identity) Owns(labels map[string]string) bool {
	for k, v := range id.Labels() {
		if labels[k] != v {
			return false
		}
	}
	return true
}
