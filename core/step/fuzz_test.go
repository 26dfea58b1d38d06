package step

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParse: Parse never panics; what it refuses is an InvalidError that names a field or the
// whole step (never "<nil>"); what it accepts marshals to JSON that parses back to a step that
// marshals to the same JSON, with the same validation result.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			require.True(t, IsInvalid(err), "bad input must be an InvalidError: %v", err)
			require.NotContains(t, err.Error(), "<nil>")
			return
		}
		first, err := json.Marshal(s)
		require.NoError(t, err)
		again, err := Parse(first)
		require.NoError(t, err, "a parsed step marshals to %s", first)
		second, err := json.Marshal(again)
		require.NoError(t, err)
		require.Equal(t, string(first), string(second))
		require.Equal(t, s.Validate().ToAggregate() == nil, again.Validate().ToAggregate() == nil)
		if s.RuntimeConfig != nil {
			require.Equal(t, s.RuntimeConfig.Env == nil, again.RuntimeConfig.Env == nil, "a set, empty env stays set")
		}
	})
}
