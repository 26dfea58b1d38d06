package trainjob

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A TrainJob that steps share (the step cache's in-flight steps, docs/cache.md) carries one hold
// per step that waits for it: the label HoldLabelPrefix + the step's owner UID (its Workflow's,
// CustomRun's, --owner-uid), valued with the step's hash (LabelStep). Keyed by owner, so what
// ends a run (an Argo stop, a Tekton cancel, a workflow deleted) finds the holds it must let go
// of with one label selector; the value tells the owner's steps apart. While a job has holds, no
// step's end deletes it but the last one's.
const HoldLabelPrefix = "hold.trainstep.dev/"

// HoldLabel is the label of the step's hold on a shared TrainJob.
func (id Identity) HoldLabel() (key, value string) {
	return HoldKey(id.OwnerUID), id.hash()[:16]
}

// HoldKey is the label key of the holds of an owner's steps.
func HoldKey(ownerUID string) string {
	return HoldLabelPrefix + labelValue(ownerUID)
}

// Holds reports whether the step holds tj.
func (id Identity) Holds(tj metav1.Object) bool {
	k, v := id.HoldLabel()
	return tj.GetLabels()[k] == v
}

// Holders are the holds on tj: the holding owner's label value (the UID, as HoldKey wrote it) →
// its step's hash. Empty for a job no step shares.
func Holders(tj metav1.Object) map[string]string {
	var h map[string]string
	for k, v := range tj.GetLabels() {
		if owner, ok := strings.CutPrefix(k, HoldLabelPrefix); ok {
			if h == nil {
				h = map[string]string{}
			}
			h[owner] = v
		}
	}
	return h
}

// OtherHolders is how many steps of owners other than ownerUID hold tj.
func OtherHolders(tj metav1.Object, ownerUID string) int {
	n := 0
	for owner := range Holders(tj) {
		if owner != labelValue(ownerUID) {
			n++
		}
	}
	return n
}
