package trainjob

import (
	"maps"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/util/validation"
)

// isLabelValue agrees with Kubernetes' own validation, and labels carried agree with Labels.
func TestIsLabelValueIsKubernetesValidation(t *testing.T) {
	for _, v := range []string{"", "a", "A", "0", "a-b", "a_b", "a.b", "-a", "a-", "_a", "a_", ".a", "a.", "a b", "ä",
		"x/y", "0b9d6a3e-5c0e-4d0e-9a67-1f9e7f6c1a2b", strings.Repeat("a", 63), strings.Repeat("a", 64), "argo", "Tekton.v1"} {
		assert.Equal(t, len(validation.IsValidLabelValue(v)) == 0, isLabelValue(v), "%q", v)
	}
}

func FuzzIsLabelValue(f *testing.F) {
	for _, s := range []string{"", "a-b", "-a", "a.", "x/y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if want := len(validation.IsValidLabelValue(v)) == 0; isLabelValue(v) != want {
			t.Fatalf("isLabelValue(%q) = %v, Kubernetes says %v", v, !want, want)
		}
	})
}

func TestOwnsIsLabels(t *testing.T) {
	for _, id := range []Identity{
		{Engine: "argo", OwnerUID: "0b9d6a3e", StepKey: "train", Attempt: 1},
		{Engine: "cli", OwnerUID: "not a label value!", StepKey: "train", Run: "r-1"},
	} {
		l := id.Labels()
		assert.True(t, id.Owns(l), "%+v", id)
		for k := range l {
			other := maps.Clone(l)
			other[k] += "x"
			assert.False(t, id.Owns(other), "%+v with %s changed", id, k)
			delete(other, k)
			assert.False(t, id.Owns(other), "%+v without %s", id, k)
		}
	}
}

// dashed is the regular expression it replaces.
func TestDashed(t *testing.T) {
	re := regexp.MustCompile(`[^a-z0-9]+`)
	for _, in := range []string{"", "train", "wf-x7k2p.train[0].step", "a..b", "ÄB", "--x--", "Train Step 1"} {
		assert.Equal(t, re.ReplaceAllString(in, "-"), dashed(in), in)
	}
}
