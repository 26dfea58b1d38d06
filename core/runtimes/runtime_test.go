package runtimes_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/trainstep/trainstep/core/runtimes"
)

// A node's resources are read from the runtime, where a node is what the job's node count
// multiplies: the planner counts a runtime's GPUs from them (core/trainjob Plan.Accelerators).
func TestNodeResources(t *testing.T) {
	job := func(name string, trainer bool, res map[string]any) any {
		j := map[string]any{"name": name, "template": map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "node", "image": name + "-img", "resources": res}}}}}}}
		if trainer {
			j["template"].(map[string]any)["metadata"] = map[string]any{"labels": map[string]any{runtimes.AncestorLabel: runtimes.AncestorTrainer}}
		}
		return j
	}
	twoGPUs := map[string]any{"limits": map[string]any{"nvidia.com/gpu": "2", "memory": "8Gi"}, "requests": map[string]any{"cpu": "4"}}
	want := corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")},
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
	}
	cpu := map[string]any{"limits": map[string]any{"cpu": "1"}}
	for name, tc := range map[string]struct {
		jobs  []any
		image string
	}{
		"the trainer's node": {jobs: []any{job("node", true, twoGPUs)}, image: "node-img"},
		"MPI: the nodes', not the trainer-labelled launcher's": {jobs: []any{job("node", false, twoGPUs), job("launcher", true, cpu)}, image: "launcher-img"},
		"MPI, the launcher first":                              {jobs: []any{job("launcher", true, cpu), job("node", false, twoGPUs)}, image: "launcher-img"},
		"a trainer job of another name":                        {jobs: []any{job("dataset-initializer", false, cpu), job("trainer", true, twoGPUs)}, image: "trainer-img"},
	} {
		t.Run(name, func(t *testing.T) {
			u := rt("ClusterTrainingRuntime", "", "r", "torch", "torch", func(u *unstructured.Unstructured) {
				require.NoError(t, unstructured.SetNestedSlice(u.Object, tc.jobs, "spec", "template", "spec", "replicatedJobs"))
			})
			r, err := runtimes.FromUnstructured(&u)
			require.NoError(t, err)
			assert.Equal(t, want, r.Resources)
			assert.Equal(t, tc.image, r.Image, "spec.trainer overrides the trainer-labelled job's")
		})
	}
}
