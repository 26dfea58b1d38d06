package tekton

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
)

// FuzzSpecFromRun builds a step from fuzzed params (JSON, as Tekton stores them) and a fuzzed
// customSpec.spec: nothing panics, and a refusal is an invalidParamsError whose every problem
// names the param that caused it (or the customSpec, or the field no param set).
func FuzzSpecFromRun(f *testing.F) {
	f.Fuzz(func(t *testing.T, params, custom []byte) {
		run := &v1beta1.CustomRun{}
		if len(params) > 0 && json.Unmarshal(params, &run.Spec.Params) != nil {
			return // the apiserver would not store it
		}
		if len(custom) > 0 {
			if !json.Valid(custom) {
				return
			}
			run.Spec.CustomSpec = &v1beta1.EmbeddedCustomRunSpec{Spec: runtime.RawExtension{Raw: custom}}
		}
		s, _, err := specFromRun(run)
		if err == nil {
			require.NotNil(t, s)
			return
		}
		var ip *invalidParamsError
		require.True(t, errors.As(err, &ip), "a refusal must be an invalidParamsError: %v", err)
		require.NotEmpty(t, ip.problems)
		for _, p := range ip.problems {
			named := strings.HasPrefix(p, `param "`) || strings.HasPrefix(p, "customSpec.spec") ||
				strings.HasPrefix(p, "params:") || strings.HasPrefix(p, "no param sets ")
			require.True(t, named, "every problem names its param: %q", p)
			require.NotContains(t, p, "<nil>")
		}
	})
}
