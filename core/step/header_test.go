package step

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHeader(t *testing.T) {
	cases := map[string]struct {
		yaml    string
		wantErr []string // substrings of the error; none means the step parses
	}{
		"absent":        {yaml: "framework: torch\ntrainer: {}\n"},
		"both right":    {yaml: "apiVersion: trainstep.dev/v1alpha1\nkind: TrainStep\nframework: torch\ntrainer: {}\n"},
		"only the kind": {yaml: "kind: TrainStep\nframework: torch\ntrainer: {}\n"},
		"wrong version": {
			yaml:    "apiVersion: trainstep.dev/v1\nkind: TrainStep\nframework: torch\ntrainer: {}\n",
			wantErr: []string{`apiVersion: Invalid value: "trainstep.dev/v1": must be trainstep.dev/v1alpha1 (or left out)`},
		},
		"wrong kind": {
			yaml:    "apiVersion: trainstep.dev/v1alpha1\nkind: Step\nframework: torch\ntrainer: {}\n",
			wantErr: []string{`kind: Invalid value: "Step": must be TrainStep (or left out)`},
		},
		"not a string": {
			yaml:    "kind: 1\nframework: torch\ntrainer: {}\n",
			wantErr: []string{`kind: Invalid value: 1: must be the string "TrainStep"`},
		},
		"a pasted TrainJob is told once, not key by key": {
			yaml:    "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: x}\nspec: {runtimeRef: {name: torch-distributed}}\n",
			wantErr: []string{"invalid training step (2 problems)", "apiVersion", "kind", "a Kubeflow TrainJob is not a step"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := Parse([]byte(tc.yaml))
			if len(tc.wantErr) == 0 {
				require.NoError(t, err)
				assert.Empty(t, s.Validate())
				return
			}
			require.Error(t, err)
			assert.True(t, IsInvalid(err))
			for _, want := range tc.wantErr {
				assert.Contains(t, err.Error(), want)
			}
			assert.NotContains(t, err.Error(), "metadata", "the rest of a foreign document is not listed")
		})
	}
}

// A Spec built in code is held to the same header.
func TestValidateHeader(t *testing.T) {
	s := &Spec{APIVersion: "v1", Kind: "Pod", Framework: "torch"}
	errs := s.Validate()
	require.Len(t, errs, 2)
	assert.Equal(t, "apiVersion", errs[0].Field)
	assert.Equal(t, "kind", errs[1].Field)
}
