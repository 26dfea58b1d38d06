package step

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNamePrefix(t *testing.T) {
	cases := map[string]struct {
		prefix  string
		wantErr string // a part of the error; none means valid
	}{
		"a label":                  {prefix: "finetune-llama"},
		"generateName's habit":     {prefix: "finetune-"},
		"exactly the limit":        {prefix: strings.Repeat("a", MaxNamePrefix)},
		"the limit and its dash":   {prefix: strings.Repeat("a", MaxNamePrefix) + "-"},
		"one past the limit":       {prefix: strings.Repeat("a", MaxNamePrefix+1), wantErr: "must be at most 20 characters (has 21): trainstep appends -<12 hex characters"},
		"upper case":               {prefix: "FineTune", wantErr: `namePrefix: Invalid value: "FineTune": a DNS-1035 label`},
		"a digit first (DNS-1035)": {prefix: "7b-tune", wantErr: "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character"},
		"a dot":                    {prefix: "llama.tune", wantErr: "such as finetune-llama"},
		"only a dash":              {prefix: "-", wantErr: "namePrefix"},
		"two dashes at the end":    {prefix: "tune--", wantErr: "namePrefix"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := Parse([]byte("framework: torch\ntrainer: {}\nnamePrefix: '" + tc.prefix + "'\n"))
			require.NoError(t, err)
			errs := s.Validate()
			if tc.wantErr == "" {
				assert.Empty(t, errs)
				return
			}
			require.Len(t, errs, 1, errs.ToAggregate())
			assert.Equal(t, "namePrefix", errs[0].Field)
			assert.Contains(t, errs[0].Error(), tc.wantErr)
		})
	}
}
