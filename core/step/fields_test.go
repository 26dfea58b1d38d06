package step

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
)

// JSONFields is the one reading of struct tags that the decoder and the schema share: it must
// agree with encoding/json on untagged, skipped, unexported and embedded fields.
func TestJSONFields(t *testing.T) {
	type Inner struct {
		Deep string `json:"deep"`
	}
	type sample struct {
		Inner
		Tagged   int    `json:"tagged,omitempty"`
		Untagged string // encoding/json keys it by its Go name
		Skipped  string `json:"-"`
		hidden   string
	}
	_ = sample{}.hidden
	got := JSONFields(reflect.TypeFor[sample]())
	want := map[string]reflect.Type{
		"deep":     reflect.TypeFor[string](),
		"tagged":   reflect.TypeFor[int](),
		"Untagged": reflect.TypeFor[string](),
	}
	assert.Equal(t, want, got)
}
