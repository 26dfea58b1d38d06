package trainjob

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/ptr"
)

func TestResumeOutputsAndMessage(t *testing.T) {
	cases := map[string]struct {
		obs         Observation
		wantOutputs map[string]string // nil: neither output
		wantNote    string
	}{
		"a face that does not know the attempt": {obs: Observation{ResumedFrom: "/ckpt/step-400"}, wantNote: "resumed from step 400"},
		"first attempt, nothing to resume":      {obs: Observation{Attempt: ptr.To(0)}, wantOutputs: map[string]string{OutAttempt: "0", OutResumedFrom: ""}},
		"retry resumed from the helper's": {obs: Observation{Attempt: ptr.To(2), ResumedFrom: "/ckpt/step-400"},
			wantOutputs: map[string]string{OutAttempt: "2", OutResumedFrom: "/ckpt/step-400"}, wantNote: "resumed from step 400 (attempt 2)"},
		"retry resumed from Hugging Face's": {obs: Observation{Attempt: ptr.To(1), ResumedFrom: "/ckpt/checkpoint-1500"},
			wantOutputs: map[string]string{OutAttempt: "1", OutResumedFrom: "/ckpt/checkpoint-1500"}, wantNote: "resumed from step 1500 (attempt 1)"},
		"a directory of another name": {obs: Observation{Attempt: ptr.To(1), ResumedFrom: "/ckpt/best"},
			wantOutputs: map[string]string{OutAttempt: "1", OutResumedFrom: "/ckpt/best"}, wantNote: "resumed from /ckpt/best (attempt 1)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.obs.Name, tc.obs.NumNodes, tc.obs.RunningNodes = "job", 2, 2
			out := tc.obs.Outputs()
			names := OrderedNames(out)
			assert.Equal(t, OutputNames, names[:len(OutputNames)], "the outputs every face writes come first")
			if tc.wantOutputs == nil {
				assert.NotContains(t, out, OutAttempt)
				assert.NotContains(t, out, OutResumedFrom)
				assert.Len(t, names, len(OutputNames))
			} else {
				for k, v := range tc.wantOutputs {
					assert.Equal(t, v, out[k], k)
				}
				assert.Equal(t, ResumeOutputNames, names[len(OutputNames):], "then the resume outputs, before any result-<key>")
			}
			assert.Equal(t, tc.wantNote, tc.obs.ResumeNote())
			msg := tc.obs.RunningMessage()
			if tc.wantNote == "" {
				assert.Equal(t, "TrainJob job is running: 2/2 nodes", msg)
			} else {
				assert.Equal(t, "TrainJob job is running: 2/2 nodes; "+tc.wantNote, msg)
			}
		})
	}
}

func TestResumeOutputsComeBeforeResultKeys(t *testing.T) {
	obs := Observation{Attempt: ptr.To(1), Result: `{"attempt": 5, "zeta": 1}`}
	names := OrderedNames(obs.Outputs())
	assert.Equal(t, []string{OutAttempt, OutResumedFrom, "result-attempt", "result-zeta"}, names[len(OutputNames):])
	assert.False(t, slices.Contains(OutputNames, OutAttempt), "not an output every face writes")
}
