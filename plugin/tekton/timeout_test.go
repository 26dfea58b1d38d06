package tekton

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
)

// Tekton leaves spec.timeout nil when the PipelineTask sets none, even under a PipelineRun
// timeout (and cancels the run itself when that passes): trainstep then applies no timeout of
// its own, rather than killing a healthy training after 60 minutes.
func TestAttemptTimeout(t *testing.T) {
	d := func(v time.Duration) *metav1.Duration { return &metav1.Duration{Duration: v} }
	s := func(v time.Duration) *step.Duration { return &step.Duration{Duration: v} }
	cases := map[string]struct {
		run  *metav1.Duration
		step *step.Duration
		want time.Duration
	}{
		"none set: none":                         {nil, nil, 0},
		"the PipelineTask's":                     {d(2 * time.Hour), nil, 2 * time.Hour},
		"0 is none":                              {d(0), nil, 0},
		"the step's alone":                       {nil, s(30 * time.Minute), 30 * time.Minute},
		"the step's tightens the PipelineTask's": {d(2 * time.Hour), s(30 * time.Minute), 30 * time.Minute},
		"the step's cannot lengthen it":          {d(time.Hour), s(3 * time.Hour), time.Hour},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			run := &v1beta1.CustomRun{}
			run.Spec.Timeout = tc.run
			assert.Equal(t, tc.want, attemptTimeout(run, &step.Spec{Timeout: tc.step}))
		})
	}
}
