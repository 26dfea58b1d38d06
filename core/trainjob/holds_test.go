package trainjob

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A hold is keyed by its owner and valued with its step, so an owner's holds are one label
// selector away and its steps are told apart.
func TestHolds(t *testing.T) {
	a := Identity{Engine: "argo", OwnerUID: "7c1b2e58-0000-4000-8000-000000000001", StepKey: "wf.train"}
	sibling := a
	sibling.StepKey = "wf.train-again"
	b := Identity{Engine: "argo", OwnerUID: "7c1b2e58-0000-4000-8000-000000000002", StepKey: "wf.train"}
	k, v := a.HoldLabel()
	assert.Equal(t, "hold.trainstep.dev/7c1b2e58-0000-4000-8000-000000000001", k)
	assert.Len(t, v, 16)
	assert.Equal(t, HoldKey(a.OwnerUID), k)
	bk, bv := b.HoldLabel()
	odd := Identity{Engine: "cli", OwnerUID: "not a label/value", StepKey: "s"}
	ok, _ := odd.HoldLabel()
	assert.Regexp(t, `^hold\.trainstep\.dev/h-[0-9a-f]{40}$`, ok, "an owner UID that is no label is hashed")

	for name, tc := range map[string]struct {
		labels               map[string]string
		aHolds, siblingHolds bool
		holders, othersThanA int
	}{
		"none":           {labels: map[string]string{LabelManagedBy: ManagedByValue}},
		"a":              {labels: map[string]string{k: v}, aHolds: true, holders: 1},
		"a and b":        {labels: map[string]string{k: v, bk: bv}, aHolds: true, holders: 2, othersThanA: 1},
		"b only":         {labels: map[string]string{bk: bv}, holders: 1, othersThanA: 1},
		"a's other step": {labels: map[string]string{k: sibling.hash()[:16]}, siblingHolds: true, holders: 1},
	} {
		t.Run(name, func(t *testing.T) {
			tj := &metav1.ObjectMeta{Labels: tc.labels}
			assert.Equal(t, tc.aHolds, a.Holds(tj))
			assert.Equal(t, tc.siblingHolds, sibling.Holds(tj))
			assert.Len(t, Holders(tj), tc.holders)
			assert.Equal(t, tc.othersThanA, OtherHolders(tj, a.OwnerUID))
		})
	}
}
