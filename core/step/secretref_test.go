package step

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// secretRef takes trainstep's string and the TrainJob's {name: …}, to the same thing.
func TestSecretRefShapes(t *testing.T) {
	base := "framework: torchtune\ntrainer: {}\ninitializer:\n  model: {storageUri: 'hf://m', secretRef: %s}\n"
	cases := map[string]struct {
		ref     string
		want    string
		wantErr string // the whole error, or a part of it
	}{
		"a name":               {ref: "hf-token", want: "hf-token"},
		"the TrainJob's shape": {ref: "{name: hf-token}", want: "hf-token"},
		"an unknown key in the object": {ref: "{name: hf-token, optional: true}",
			wantErr: `initializer.model.secretRef.optional: Invalid value: "optional": unknown field (known fields here: name)`},
		"a typo of name": {ref: "{nam: hf-token}", wantErr: `did you mean "name"?`},
		"a number": {ref: "1",
			wantErr: `initializer.model.secretRef: Invalid value: 1: must be a Secret's name, or {name: <Secret's name>}`},
		"a list": {ref: "[a]", wantErr: `initializer.model.secretRef: Invalid value: ["a"]: must be a Secret's name`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := Parse(fmt.Appendf(nil, base, tc.ref))
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Empty(t, s.Validate())
			assert.Equal(t, &SecretRef{Name: tc.want}, s.Initializer.Model.SecretRef)
			b, err := json.Marshal(s)
			require.NoError(t, err)
			again, err := Parse(b)
			require.NoError(t, err, "and it round-trips: %s", b)
			assert.Equal(t, s, again)
		})
	}
}

func TestSecretRefBadNames(t *testing.T) {
	cases := map[string]struct{ ref, want string }{
		"empty object": {"{}", "initializer.dataset.secretRef: Required value: the Secret's name (secretRef: hf-token, or secretRef: {name: hf-token})"},
		"empty name":   {"{name: ''}", "initializer.dataset.secretRef: Required value"},
		"not a name":   {"'My Secret'", `initializer.dataset.secretRef: Invalid value: "My Secret": a lowercase RFC 1123 subdomain`},
		"object, bad":  {"{name: My_Secret}", `initializer.dataset.secretRef: Invalid value: "My_Secret"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := Parse(fmt.Appendf(nil, "framework: torchtune\ntrainer: {}\ninitializer: {dataset: {storageUri: 'hf://d', secretRef: %s}}\n", tc.ref))
			require.NoError(t, err)
			assert.Contains(t, s.Validate().ToAggregate().Error(), tc.want)
		})
	}
}
