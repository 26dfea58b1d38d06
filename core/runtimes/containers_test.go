package runtimes_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/trainstep/trainstep/core/runtimes"
)

// The kubelet divides a pod's termination-message room by every container it runs, init
// containers included, so the trainer pod's count is read from the runtime's template.
func TestTrainerPodContainers(t *testing.T) {
	for name, tc := range map[string]struct {
		containers, inits []any
		want              int
	}{
		"the node alone":          {containers: []any{map[string]any{"name": "node", "image": "img"}}, want: 1},
		"sidecars":                {containers: []any{map[string]any{"name": "node", "image": "img"}, map[string]any{"name": "proxy"}, map[string]any{"name": "logs"}}, want: 3},
		"init and native sidecar": {containers: []any{map[string]any{"name": "node", "image": "img"}}, inits: []any{map[string]any{"name": "certs"}, map[string]any{"name": "mesh", "restartPolicy": "Always"}}, want: 3},
	} {
		t.Run(name, func(t *testing.T) {
			u := rt("ClusterTrainingRuntime", "", "r", "torch", "torch", func(u *unstructured.Unstructured) {
				jobs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "replicatedJobs")
				pod := []string{"template", "spec", "template", "spec"}
				job := jobs[0].(map[string]any)
				require.NoError(t, unstructured.SetNestedSlice(job, tc.containers, append(pod, "containers")...))
				if tc.inits != nil {
					require.NoError(t, unstructured.SetNestedSlice(job, tc.inits, append(pod, "initContainers")...))
				}
				require.NoError(t, unstructured.SetNestedSlice(u.Object, jobs, "spec", "template", "spec", "replicatedJobs"))
			})
			r, err := runtimes.FromUnstructured(&u)
			require.NoError(t, err)
			assert.Equal(t, tc.want, r.TrainerPodContainers())
		})
	}
	assert.Equal(t, 1, (&runtimes.Runtime{}).TrainerPodContainers(), "a runtime that does not say")
}
