package argo

import (
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/pkg/plugins/executor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/core/step"
)

// The step's namePrefix names the node's TrainJob; the identity (labels) is the node's as ever.
func TestRequestIdentityTakesTheStepsNamePrefix(t *testing.T) {
	r := &request{Workflow: executor.ObjectMeta{Name: "wf", UID: "uid-1"}, Key: "wf-x7k2p.train", Spec: &step.Spec{}}
	plain := r.identity("1")
	assert.Regexp(t, `^wf-x7k2p-train-[0-9a-f]{12}$`, plain.Name())
	r.Spec.NamePrefix = "nightly"
	named := r.identity("1")
	assert.Regexp(t, `^nightly-[0-9a-f]{12}$`, named.Name())
	assert.Equal(t, plain.Name()[len(plain.Name())-12:], named.Name()[len(named.Name())-12:], "the same hash")
	assert.Equal(t, plain.Labels(), named.Labels())
}

// A template may declare the resume and cache outputs only for a step that writes them: one with
// a checkpoint block, one with a cache block. Any other name is refused with the names it may
// take.
func TestDeclaredOutputs(t *testing.T) {
	params := func(names ...string) []wfv1.Parameter {
		var ps []wfv1.Parameter
		for _, n := range names {
			ps = append(ps, wfv1.Parameter{Name: n})
		}
		return ps
	}
	resumes := &step.Spec{Checkpoint: &step.Checkpoint{URI: "s3://b/p"}}
	caches := &step.Spec{Cache: &step.Cache{}}
	cases := map[string]struct {
		params  []wfv1.Parameter
		spec    *step.Spec
		wantErr []string // substrings of the one error; nil: none
	}{
		"core outputs":                    {params: params("trainjob-name", "result-loss", "metric-loss")},
		"resume outputs of a resumer":     {params: params("trainjob-name", "attempt", "resumed-from"), spec: resumes},
		"resume outputs of a non-resumer": {params: params("trainjob-name", "resumed-from"), spec: caches, wantErr: []string{"outputs.parameters[1].name", `"resumed-from"`, "checkpoint block", "docs/resume.md"}},
		"cache outputs of a cached step":  {params: params("cache-hit", "cached-from", "cache-key"), spec: caches},
		"cache outputs of another":        {params: params("cache-hit"), spec: resumes, wantErr: []string{"outputs.parameters[0].name", `"cache-hit"`, "cache block", "docs/cache.md"}},
		"unknown":                         {params: params("loss"), spec: resumes, wantErr: []string{"outputs.parameters[0].name", "Unsupported value", `"attempt"`, `"cached-from"`, "result-<key of the returned dict>"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.spec == nil {
				tc.spec = &step.Spec{}
			}
			names, errs := declaredOutputs(tc.params, tc.spec)
			assert.Len(t, names, len(tc.params))
			if tc.wantErr == nil {
				assert.Empty(t, errs)
				return
			}
			require.Len(t, errs, 1)
			for _, w := range tc.wantErr {
				assert.Contains(t, errs[0].Error(), w)
			}
		})
	}
}
