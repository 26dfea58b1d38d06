// Package previous names and labels a TrainJob exactly as the release before 1 Dec 2026 did
// (core/trainjob/identity.go at 89c544f, the commit before names were shortened and Argo's
// identity got a run part), so tests can start a step under that release's naming and finish it
// with this one. It is a copy on purpose: it must not follow changes to core/trainjob.
package previous

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Identity is the previous release's identity: no run.
type Identity struct {
	Engine   string
	OwnerUID string
	StepKey  string
	Attempt  int
}

func (id Identity) hash() string {
	sum := sha256.Sum256([]byte(strings.Join([]string{id.Engine, id.OwnerUID, id.StepKey, strconv.Itoa(id.Attempt)}, "\x00")))
	return hex.EncodeToString(sum[:])
}

var nonName = regexp.MustCompile(`[^a-z0-9]+`)

// Name is the TrainJob name the previous release gave: the step key cut at 28 characters, a dash
// and 12 hex characters of the hash.
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

// Labels are the identity labels the previous release put on the TrainJob.
func (id Identity) Labels() map[string]string {
	return map[string]string{
		"app.kubernetes.io/managed-by": "trainstep",
		"trainstep.dev/engine":         labelValue(id.Engine),
		"trainstep.dev/owner-uid":      labelValue(id.OwnerUID),
		"trainstep.dev/step":           id.hash()[:16],
		"trainstep.dev/attempt":        strconv.Itoa(id.Attempt),
	}
}

// Annotations are the annotations the previous release put on the TrainJob.
func (id Identity) Annotations() map[string]string {
	return map[string]string{"trainstep.dev/step-key": id.StepKey, "trainstep.dev/owner-uid": id.OwnerUID}
}

func labelValue(v string) string {
	if len(validation.IsValidLabelValue(v)) == 0 {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "h-" + hex.EncodeToString(sum[:])[:40]
}

// Stamp makes obj, the step's TrainJob as this release renders it, the one the previous release
// made: its name, its identity labels (no trainstep.dev/run) and its annotations. The spec is
// this release's; the faces follow a job by its identity and status, not by how its spec was
// rendered.
func (id Identity) Stamp(obj metav1.Object) {
	obj.SetName(id.Name())
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	delete(labels, "trainstep.dev/run")
	for k, v := range id.Labels() {
		labels[k] = v
	}
	obj.SetLabels(labels)
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	for k, v := range id.Annotations() {
		annotations[k] = v
	}
	obj.SetAnnotations(annotations)
}
