package tekton

import (
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trainstep/trainstep/core/trainjob"
)

func TestWorkloadsServed(t *testing.T) {
	served := meta.NewDefaultRESTMapper(nil)
	served.Add(trainjob.WorkloadGVK, meta.RESTScopeNamespace)
	oldOnly := meta.NewDefaultRESTMapper(nil)
	oldOnly.Add(schema.GroupVersionKind{Group: trainjob.WorkloadGVK.Group, Version: "v1beta1", Kind: "Workload"}, meta.RESTScopeNamespace)
	for _, tc := range []struct {
		name   string
		mapper meta.RESTMapper
		want   bool
	}{
		{"served", served, true},
		{"no Kueue", meta.NewDefaultRESTMapper(nil), false},
		// A Kueue older than v0.15 serves no v1beta2: the cache could not list the kind it reads.
		{"only v1beta1", oldOnly, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, workloadsServed(tc.mapper, logr.Discard()))
		})
	}
}

// The cache lists only Workloads Kueue made for a job, and keeps of another job kind's no more
// than its identity: not its pod sets, whose templates carry that job's scripts.
func TestWorkloadCache(t *testing.T) {
	byObject := workloadCache()
	script := strings.Repeat("x", 20<<10)
	workload := func(labels map[string]string, owner metav1.OwnerReference) *unstructured.Unstructured {
		w := newWorkload()
		w.SetName("w")
		w.SetNamespace("ns")
		w.SetLabels(labels)
		w.SetOwnerReferences([]metav1.OwnerReference{owner})
		w.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kueue"}})
		w.SetAnnotations(map[string]string{"kubectl.kubernetes.io/last-applied-configuration": script})
		w.Object["spec"] = map[string]any{"active": false, "podSets": []any{map[string]any{"name": "node",
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"command": []any{script}}}}}}}}
		w.Object["status"] = map[string]any{"admission": map[string]any{"clusterQueue": "cq"}}
		return w
	}
	job := metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: "job-uid"}
	tj := metav1.OwnerReference{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: "tj", UID: "tj-uid"}
	uid := map[string]string{trainjob.LabelKueueJobUID: "u"}
	for _, tc := range []struct {
		name     string
		labels   map[string]string
		owner    metav1.OwnerReference
		selected bool
		spec     map[string]any
	}{
		{"a Job's", uid, job, true, nil},
		{"a TrainJob's", uid, tj, true, map[string]any{"active": false}},
		{"made by hand", map[string]string{"team": "a"}, job, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := workload(tc.labels, tc.owner)
			assert.Equal(t, tc.selected, byObject.Label.Matches(labels.Set(w.GetLabels())))
			out, err := byObject.Transform(w)
			require.NoError(t, err)
			got := out.(*unstructured.Unstructured)
			assert.Equal(t, []metav1.OwnerReference{tc.owner}, got.GetOwnerReferences())
			assert.Equal(t, "w", got.GetName())
			assert.Empty(t, got.GetManagedFields())
			assert.Empty(t, got.GetAnnotations())
			spec, _, _ := unstructured.NestedMap(got.Object, "spec")
			assert.Equal(t, tc.spec, spec, "no pod sets")
		})
	}
}
