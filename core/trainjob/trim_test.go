package trainjob

import (
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// TestTrimPodKeepsWhatDecideReads: every verdict the follow policy gives is the same on trimmed
// pods, which carry of the spec only the containers' names and the status server's env name,
// and no annotations or managedFields.
func TestTrimPodKeepsWhatDecideReads(t *testing.T) {
	running := pod("job", NodeJob, 0, corev1.PodRunning)
	full := []corev1.Pod{unschedulable("job-node-0-0-x"), failedNode("job-node-0-1-a", t0, 1), imagePull(), running}
	var trimmed []corev1.Pod
	for i := range full {
		full[i].Spec.Containers = []corev1.Container{{Name: "node", Image: "python", Command: []string{"bash", "-c", "long script"},
			Env: []corev1.EnvVar{{Name: "BIG", Value: "x"}}}}
		if i == 0 {
			full[i].Spec.Containers[0].Env = append(full[i].Spec.Containers[0].Env, corev1.EnvVar{Name: EnvStatusURL, Value: "https://x"})
		}
		p := full[i].DeepCopy()
		p.Annotations = map[string]string{"big": "x"}
		p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
		out, err := TrimPod(p)
		require.NoError(t, err)
		tp := out.(*corev1.Pod)
		want := []corev1.Container{{Name: "node"}}
		if i == 0 {
			want[0].Env = []corev1.EnvVar{{Name: EnvStatusURL}}
		}
		assert.Equal(t, want, tp.Spec.Containers)
		assert.Empty(t, tp.Annotations)
		assert.Empty(t, tp.ManagedFields)
		assert.Equal(t, full[i].Labels, tp.Labels)
		trimmed = append(trimmed, *tp)
	}
	for name, tj := range map[string]*trainer.TrainJob{
		"running": followJob(),
		"failed":  followJob(at(cond(trainer.TrainJobFailed, metav1.ConditionTrue, "FailedJobs"), t0.Add(time.Minute))),
	} {
		d := Deadlines{StartTimeout: time.Minute, Timeout: time.Hour}
		now := t0.Add(2 * time.Minute)
		assert.Equal(t, Decide(Snapshot{TrainJob: tj, Pods: full, Now: now}, d), Decide(Snapshot{TrainJob: tj, Pods: trimmed, Now: now}, d), name)
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: &full[0]}
	out, err := TrimPod(tomb)
	require.NoError(t, err)
	assert.Equal(t, tomb, out, "a tombstone passes through")
}

func TestStripManagedFields(t *testing.T) {
	tj := followJob()
	tj.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "trainstep"}}
	tj.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: "{}", AnnotationStepKey: "k"}
	out, err := StripManagedFields(tj)
	require.NoError(t, err)
	assert.Empty(t, out.(*trainer.TrainJob).ManagedFields)
	assert.Equal(t, map[string]string{AnnotationStepKey: "k"}, out.(*trainer.TrainJob).Annotations)
	_, err = StripManagedFields(cache.DeletedFinalStateUnknown{})
	assert.NoError(t, err)
}

// TestTrimWorkloadKeepsWhatReadWorkloadReads: a TrainJob's Workload reads the same trimmed as
// whole, without its pod sets; another integration's Workload keeps only its identity.
func TestTrimWorkloadKeepsWhatReadWorkloadReads(t *testing.T) {
	full := workloadObject("tj-uid", []any{
		map[string]any{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "", "lastTransitionTime": "2026-12-01T10:00:00Z"},
		map[string]any{"type": "Admitted", "status": "True", "reason": "Admitted", "message": "", "lastTransitionTime": "2026-12-01T10:00:05Z"},
		wlCond("Evicted", "True", "DeactivatedDueToRequeuingLimitExceeded", "The workload is deactivated due to exceeding the maximum number of re-queuing retries"),
	}, []any{map[string]any{"reason": "PodsReadyTimeout", "underlyingCause": "WaitForStart", "count": int64(2)}})
	full.SetLabels(map[string]string{LabelKueueJobUID: "tj-uid", "other": "x"})
	full.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kueue"}})
	require.NoError(t, unstructured.SetNestedField(full.Object, false, "spec", "active"))
	require.NoError(t, unstructured.SetNestedSlice(full.Object, []any{map[string]any{"name": "node", "count": int64(1),
		"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "node", "command": []any{"bash", "-c", "a long training script"}}}}}}},
		"spec", "podSets"))
	require.NoError(t, unstructured.SetNestedField(full.Object, "worker", "status", "clusterName"))
	require.NoError(t, unstructured.SetNestedField(full.Object, []any{map[string]any{"name": "node"}}, "status", "admission", "podSetAssignments"))

	got, err := TrimWorkload(full.DeepCopy())
	require.NoError(t, err)
	trimmed := got.(*unstructured.Unstructured)
	assert.Equal(t, ReadWorkload(&full), ReadWorkload(trimmed))
	w := ReadWorkload(trimmed)
	assert.True(t, w.Inactive)
	assert.True(t, w.Admitted)
	assert.Equal(t, time.Date(2026, 12, 1, 10, 0, 5, 0, time.UTC), w.AdmittedAt.UTC())
	assert.Equal(t, "DeactivatedDueToRequeuingLimitExceeded", w.EvictedReason)
	assert.Equal(t, 2, w.Evictions)
	assert.Equal(t, "worker", w.Cluster)
	assert.Equal(t, "gpu-cq", w.ClusterQueue)
	_, found, _ := unstructured.NestedFieldNoCopy(trimmed.Object, "spec", "podSets")
	assert.False(t, found, "pod sets dropped")
	_, found, _ = unstructured.NestedFieldNoCopy(trimmed.Object, "status", "admission", "podSetAssignments")
	assert.False(t, found, "admission details dropped")
	assert.Nil(t, trimmed.GetManagedFields())
	assert.Equal(t, map[string]string{LabelKueueJobUID: "tj-uid"}, trimmed.GetLabels())

	foreign := full.DeepCopy()
	foreign.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: "job-uid"}})
	got, err = TrimWorkload(foreign)
	require.NoError(t, err)
	stub := got.(*unstructured.Unstructured)
	assert.Equal(t, foreign.GetName(), stub.GetName())
	assert.NotContains(t, stub.Object, "spec")
	assert.NotContains(t, stub.Object, "status")

	tomb := cache.DeletedFinalStateUnknown{Key: "ns/w"}
	got, err = TrimWorkload(tomb)
	require.NoError(t, err)
	assert.Equal(t, tomb, got)
}

// What following a TrainJob reads survives the trim; the training function's source does not.
func TestTrimTrainJobKeepsWhatObserveReads(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "tj", Namespace: "ns", UID: "u", ResourceVersion: "7", CreationTimestamp: created,
			Labels: map[string]string{LabelEngine: "tekton", LabelFramework: "jax"},
			Annotations: map[string]string{"big": "x", AnnotationStartedAt: "2026-12-01T10:05:00Z", AnnotationKept: "timed out", AnnotationCacheKey: "0a1b",
				AnnotationAccelerators: "8"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "CustomRun", Name: "run", Controller: ptr.To(true)}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "m"}}},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "jax-distributed"},
			Suspend:    ptr.To(true),
			Trainer: &trainer.Trainer{NumNodes: ptr.To(int32(3)), Command: []string{"bash", "-c", "def train(): ..."},
				ResourcesPerNode: &corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}},
		},
		Status: trainer.TrainJobStatus{Conditions: []metav1.Condition{{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue}}},
	}
	out, err := TrimTrainJob(tj.DeepCopy())
	require.NoError(t, err)
	got := out.(*trainer.TrainJob)
	assert.Equal(t, Observe(tj, nil), Observe(got, nil))
	assert.Equal(t, tj.OwnerReferences, got.OwnerReferences)
	assert.Equal(t, tj.ResourceVersion, got.ResourceVersion)
	assert.Equal(t, tj.Spec.Suspend, got.Spec.Suspend)
	assert.Equal(t, map[string]string{AnnotationStartedAt: "2026-12-01T10:05:00Z", AnnotationKept: "timed out", AnnotationCacheKey: "0a1b", AnnotationAccelerators: "8"},
		got.Annotations, "only the start record, the kept mark, the cache key and the accelerators")
	assert.Nil(t, got.Spec.Trainer.ResourcesPerNode, "counted in the annotation")
	delete(tj.Annotations, AnnotationAccelerators)
	earlier, err := TrimTrainJob(tj.DeepCopy())
	require.NoError(t, err)
	assert.Equal(t, tj.Spec.Trainer.ResourcesPerNode, earlier.(*trainer.TrainJob).Spec.Trainer.ResourcesPerNode,
		"an earlier release's job, without the annotation, is counted from its resourcesPerNode")
	assert.True(t, Kept(got), "the cleanups leave a kept job alone, read from the cache")
	assert.Equal(t, created.Add(5*time.Minute), StartedAt(got))
	assert.Empty(t, got.ManagedFields)
	assert.Empty(t, got.Spec.Trainer.Command)

	tomb := "not a TrainJob"
	same, err := TrimTrainJob(tomb)
	require.NoError(t, err)
	assert.Equal(t, tomb, same)
}
