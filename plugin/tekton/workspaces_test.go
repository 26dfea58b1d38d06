package tekton

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
)

func runWithWorkspaces(t *testing.T, annotations map[string]string, bindings ...string) *v1beta1.CustomRun {
	t.Helper()
	run := &v1beta1.CustomRun{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}}
	for _, b := range bindings {
		require.True(t, json.Valid([]byte(b)), b)
		run.Spec.Workspaces = append(run.Spec.Workspaces, json.RawMessage(b))
	}
	return run
}

// Tekton accepts any non-empty, unique workspace name and names the pod volumes itself; each
// becomes a valid, distinct volume, mounted at Tekton's /workspace/<name>, and the step passes
// validation.
func TestWorkspaceNamesTektonAccepts(t *testing.T) {
	names := []string{"data", "sharedData", "shared_data", "shared-data", "shared.data", "SHARED_DATA", "_", "trainstep-data",
		"a-very-long-workspace-name-that-goes-on-and-on-well-past-the-sixty-three-characters-of-a-label"}
	var bindings []string
	for _, n := range names {
		bindings = append(bindings, `{"name":"`+n+`","emptyDir":{}}`)
	}
	spec := &step.Spec{}
	require.NoError(t, podFromRun(runWithWorkspaces(t, nil, bindings...), spec))
	require.Len(t, spec.Pod.Volumes, len(names))
	seen := map[string]string{}
	for i, v := range spec.Pod.Volumes {
		assert.Empty(t, validation.IsDNS1123Label(v.Name), "volume of workspace %q", names[i])
		assert.NotContains(t, seen, v.Name, "workspaces %q and %q share a volume", seen[v.Name], names[i])
		seen[v.Name] = names[i]
		assert.Equal(t, v.Name, spec.Pod.VolumeMounts[i].Name)
		assert.Equal(t, "/workspace/"+names[i], spec.Pod.VolumeMounts[i].MountPath)
		assert.Equal(t, v.Name, volumeName(names[i]), "the same name on every reconcile")
	}
	assert.Equal(t, "data", spec.Pod.Volumes[0].Name, "a DNS label is kept as it is")
	assert.Empty(t, spec.Pod.Validate(field.NewPath("pod")))
}

// A PersistentVolumeClaim shared through Tekton's affinity assistant pins the TrainJob's pods to
// the assistant's node with the term Tekton gives a TaskRun's pod; with no claim, or no
// assistant, nothing is pinned; the step's own affinity is kept.
func TestAffinityAssistantPinsThePods(t *testing.T) {
	const aa = "affinity-assistant-0123456789"
	annotated := map[string]string{AnnotationAffinityAssistant: aa}
	pvc := `{"name":"shared_data","persistentVolumeClaim":{"claimName":"data"}}`
	term := corev1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
			"app.kubernetes.io/instance": aa, "app.kubernetes.io/component": "affinity-assistant"}},
		TopologyKey: "kubernetes.io/hostname",
	}
	own := corev1.PodAffinityTerm{TopologyKey: "topology.kubernetes.io/zone",
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cache"}}}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		bindings    []string
		own         bool
		want        []corev1.PodAffinityTerm
	}{
		{name: "claim through an assistant", annotations: annotated, bindings: []string{pvc}, want: []corev1.PodAffinityTerm{term}},
		{name: "the step's own terms are kept", annotations: annotated, bindings: []string{pvc}, own: true, want: []corev1.PodAffinityTerm{own, term}},
		{name: "no assistant (coschedule: disabled)", bindings: []string{pvc}},
		{name: "no claim to share (coschedule: pipelineruns annotates every run)", annotations: annotated,
			bindings: []string{`{"name":"cfg","configMap":{"name":"c"}}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &step.Spec{}
			if tc.own {
				spec.Pod = &step.Pod{Affinity: &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{own}}}}
			}
			require.NoError(t, podFromRun(runWithWorkspaces(t, tc.annotations, tc.bindings...), spec))
			var got []corev1.PodAffinityTerm
			if a := spec.Pod.Affinity; a != nil && a.PodAffinity != nil {
				got = a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution
			}
			assert.Equal(t, tc.want, got)
		})
	}
}
