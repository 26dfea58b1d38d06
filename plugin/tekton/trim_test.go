package tekton

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
)

func TestTrimCustomRun(t *testing.T) {
	done := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	run := func(ref *v1beta1.TaskRef, finished bool) *v1beta1.CustomRun {
		r := &v1beta1.CustomRun{
			ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: "ns", UID: "u", ResourceVersion: "9", Generation: 2,
				Labels:        map[string]string{"tekton.dev/pipelineRun": "pr"},
				Annotations:   map[string]string{"from-the-pipelinerun": "x"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
			Spec: v1beta1.CustomRunSpec{CustomRef: ref, Retries: 1, Status: v1beta1.SpecStatusCancelled,
				Params: []v1beta1.Param{{Name: "trainer.func"}}, Workspaces: []json.RawMessage{[]byte(`{"name":"data"}`)}},
			Status: v1beta1.CustomRunStatus{ObservedGeneration: 1,
				Conditions:  []v1beta1.Condition{{Type: v1beta1.ConditionSucceeded, Status: corev1.ConditionUnknown}},
				Results:     []v1beta1.CustomRunResult{{Name: "phase", Value: "Succeeded"}},
				ExtraFields: runtime.RawExtension{Raw: []byte(`{"trainJob":"tj"}`)}},
		}
		if finished {
			r.Status.CompletionTime = &done
		}
		return r.DeepCopy() // through JSON once, as a decoded (cached) run is
	}
	trim := func(r *v1beta1.CustomRun) *v1beta1.CustomRun {
		out, err := trimCustomRun(r)
		require.NoError(t, err)
		return out.(*v1beta1.CustomRun)
	}
	oursRef := &v1beta1.TaskRef{APIVersion: APIVersion, Kind: Kind}

	t.Run("running run of ours keeps spec and status", func(t *testing.T) {
		in := run(oursRef, false)
		got := trim(in.DeepCopy())
		assert.Equal(t, in.Spec, got.Spec)
		assert.Equal(t, in.Status, got.Status)
		assert.Equal(t, in.Labels, got.Labels)
		assert.Equal(t, in.Generation, got.Generation)
		assert.Empty(t, got.Annotations)
		assert.Empty(t, got.ManagedFields)
	})
	t.Run("a running run keeps Tekton's affinity-assistant annotation, which places its pods", func(t *testing.T) {
		in := run(oursRef, false)
		in.Annotations[AnnotationAffinityAssistant] = "affinity-assistant-0123456789"
		got := trim(in.DeepCopy())
		assert.Equal(t, map[string]string{AnnotationAffinityAssistant: "affinity-assistant-0123456789"}, got.Annotations)
		in.Status.CompletionTime = &done
		assert.Empty(t, trim(in.DeepCopy()).Annotations, "a finished run places nothing")
	})
	t.Run("finished run of ours keeps what a re-assertion reads", func(t *testing.T) {
		in := run(oursRef, true)
		in.Status.RetriesStatus = []v1beta1.CustomRunStatus{{StartTime: &done}}
		got := trim(in.DeepCopy())
		assert.Equal(t, in.Status.Conditions, got.Status.Conditions)
		assert.Equal(t, in.Status.CompletionTime, got.Status.CompletionTime)
		assert.Equal(t, in.Status.ObservedGeneration, got.Status.ObservedGeneration)
		assert.Equal(t, in.Status.ExtraFields, got.Status.ExtraFields, "the terminal record")
		assert.True(t, got.RefersTo(APIVersion, Kind))
		assert.Equal(t, in.Spec.Status, got.Spec.Status)
		assert.Equal(t, in.Generation, got.Generation)
		assert.Empty(t, got.Spec.Params)
		assert.Empty(t, got.Spec.Workspaces)
		assert.Empty(t, got.Status.Results, "patched around, never written back")
		assert.Empty(t, got.Status.RetriesStatus)
	})
	t.Run("another custom task's run keeps only what turns it away", func(t *testing.T) {
		in := run(&v1beta1.TaskRef{APIVersion: "example.dev/v1", Kind: "Wait"}, false)
		got := trim(in.DeepCopy())
		assert.False(t, got.RefersTo(APIVersion, Kind))
		assert.Equal(t, client.ObjectKeyFromObject(in), client.ObjectKeyFromObject(got))
		assert.Empty(t, got.Spec.Params)
		assert.Equal(t, v1beta1.CustomRunStatus{}, got.Status)
	})
	t.Run("an embedded spec of another kind likewise", func(t *testing.T) {
		in := run(nil, false)
		in.Spec.CustomSpec = &v1beta1.EmbeddedCustomRunSpec{Spec: runtime.RawExtension{Raw: []byte(`{"a":1}`)}}
		in.Spec.CustomSpec.APIVersion, in.Spec.CustomSpec.Kind = "example.dev/v1", "Wait"
		got := trim(in.DeepCopy())
		assert.False(t, got.RefersTo(APIVersion, Kind))
		assert.Empty(t, got.Spec.CustomSpec.Spec.Raw)
	})
}

// With labelled pods the controller caches only this face's JobSet pods; without, every JobSet pod.
func TestPodSelector(t *testing.T) {
	jobset := labels.Set{trainjob.LabelJobSetName: "tj"}
	ours := labels.Merge(jobset, labels.Set{trainjob.LabelManagedBy: trainjob.ManagedByValue, trainjob.LabelEngine: Engine, trainjob.LabelOwnerUID: "u"})
	argo := labels.Merge(ours, labels.Set{trainjob.LabelEngine: "argo"})
	assert.True(t, podSelector(true).Matches(ours))
	assert.False(t, podSelector(true).Matches(jobset), "someone else's JobSet pod")
	assert.False(t, podSelector(true).Matches(argo), "another face's pod")
	assert.True(t, podSelector(false).Matches(jobset))
	assert.True(t, podSelector(false).Matches(ours))
	assert.False(t, podSelector(false).Matches(labels.Set{"app": "x"}), "not a JobSet pod")
}
