package trainjob

import (
	"fmt"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Informer caches keep every object they list for as long as the process runs, so each face
// trims what it caches to what trainstep reads (a transform runs before an object is stored).

// TrimPod keeps of a pod only what following a TrainJob reads: its name, labels (jobset-name,
// replicated job, completion index), owners and status (phase, conditions, container states).
// Of the spec, the containers' names and whether they got the status server's URL (the name of
// env EnvStatusURL, for progressOff); the rest of the spec, annotations and managedFields (most
// of a pod's bytes) are dropped. Anything that is
// not a *corev1.Pod (a DeletedFinalStateUnknown tombstone) passes through unchanged.
func TrimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              p.Name,
			Namespace:         p.Namespace,
			UID:               p.UID,
			ResourceVersion:   p.ResourceVersion,
			CreationTimestamp: p.CreationTimestamp,
			DeletionTimestamp: p.DeletionTimestamp,
			Labels:            p.Labels,
			OwnerReferences:   p.OwnerReferences,
		},
		Spec: trimSpec(p),
		Status: corev1.PodStatus{
			Phase:                 p.Status.Phase,
			Reason:                p.Status.Reason,
			Message:               p.Status.Message,
			Conditions:            p.Status.Conditions,
			StartTime:             p.Status.StartTime,
			InitContainerStatuses: p.Status.InitContainerStatuses,
			ContainerStatuses:     p.Status.ContainerStatuses,
			// Counted with the others when a cut result is explained (podContainers).
			EphemeralContainerStatuses: p.Status.EphemeralContainerStatuses,
		},
	}, nil
}

func trimSpec(p *corev1.Pod) corev1.PodSpec {
	var spec corev1.PodSpec
	for _, c := range p.Spec.Containers {
		kept := corev1.Container{Name: c.Name}
		for _, e := range c.Env {
			if e.Name == EnvStatusURL {
				kept.Env = []corev1.EnvVar{{Name: e.Name}}
			}
		}
		spec.Containers = append(spec.Containers, kept)
	}
	return spec
}

// TrimTrainJob keeps of a cached TrainJob what following it reads: its identity labels, owners,
// creation and deletion, runtime, suspend, managedBy (a MultiKueue job runs elsewhere), node
// count, status, and trainstep's own annotations (AnnotationPrefix), which the lifecycle, the
// cleanups and the cost outputs read (started-at: the job has started and startTimeout no longer
// applies; kept: no part of trainstep deletes it; cache-key: the step cache stores its outputs;
// accelerators: what a node gets, for gpu-hours; a retry's retry-of, step-since and
// first-since: the job it replaces and when the step began). A TrainJob an earlier release made
// carries no accelerators and keeps its
// resourcesPerNode, which they are counted from instead. The trainer's command (the training
// function's source and the command script with its report() helper, 11 KB of it), env,
// initializers, runtime patches, other annotations and managedFields are most of a TrainJob's
// bytes, held once per TrainJob the cache sees. The faces never write a TrainJob they read from
// the cache (a patch of metadata at most), so nothing dropped is written back. Anything that is
// not a *trainer.TrainJob (a DeletedFinalStateUnknown tombstone) passes through unchanged.
func TrimTrainJob(obj any) (any, error) {
	tj, ok := obj.(*trainer.TrainJob)
	if !ok {
		return obj, nil
	}
	out := &trainer.TrainJob{
		TypeMeta: tj.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              tj.Name,
			Namespace:         tj.Namespace,
			UID:               tj.UID,
			ResourceVersion:   tj.ResourceVersion,
			Generation:        tj.Generation,
			CreationTimestamp: tj.CreationTimestamp,
			DeletionTimestamp: tj.DeletionTimestamp,
			Labels:            tj.Labels,
			OwnerReferences:   tj.OwnerReferences,
		},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: tj.Spec.RuntimeRef,
			Suspend:    tj.Spec.Suspend,
			ManagedBy:  tj.Spec.ManagedBy,
		},
		Status: tj.Status,
	}
	if t := tj.Spec.Trainer; t != nil {
		kept := trainer.Trainer{NumNodes: t.NumNodes}
		if _, counted := tj.Annotations[AnnotationAccelerators]; !counted {
			kept.ResourcesPerNode = t.ResourcesPerNode
		}
		if kept.NumNodes != nil || kept.ResourcesPerNode != nil {
			out.Spec.Trainer = &kept
		}
	}
	for key, v := range tj.Annotations {
		if strings.HasPrefix(key, AnnotationPrefix) {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[key] = v
		}
	}
	return out, nil
}

// AnnotationPrefix begins every annotation trainstep writes on a TrainJob: each is a few bytes,
// and what reads it (the lifecycle's retries, the cost outputs) reads a face's trimmed cache.
const AnnotationPrefix = "trainstep.dev/"

// StripManagedFields drops an object's managedFields (server-side apply bookkeeping trainstep
// never reads) and the kubectl last-applied annotation, a second copy of the object.
func StripManagedFields(obj any) (any, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return obj, nil //nolint:nilerr // a tombstone or a list: nothing to strip
	}
	if m.GetManagedFields() != nil {
		m.SetManagedFields(nil)
	}
	if a := m.GetAnnotations(); a != nil {
		if _, ok := a[corev1.LastAppliedConfigAnnotation]; ok {
			delete(a, corev1.LastAppliedConfigAnnotation)
			m.SetAnnotations(a)
		}
	}
	return obj, nil
}

// TrimWorkload keeps of a cached Kueue Workload only what ReadWorkload and WorkloadOf read: its
// identity, owner references, spec.active, and of its status the conditions, the ClusterQueue
// it was admitted to, the MultiKueue worker cluster and the eviction counts. The pod sets (each
// a whole pod template: a TrainJob's carries its training script, up to 1 MiB), resource usage,
// admission checks' details and managedFields are dropped. A Workload no TrainJob owns (a Job's,
// a RayCluster's, another integration's) keeps only its identity, so a cache of every Workload
// of the namespaces watched costs a few hundred bytes for each that is not trainstep's. Anything
// that is not an *unstructured.Unstructured (a DeletedFinalStateUnknown tombstone) passes
// through unchanged.
func TrimWorkload(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetAPIVersion(u.GetAPIVersion())
	out.SetKind(u.GetKind())
	out.SetName(u.GetName())
	out.SetNamespace(u.GetNamespace())
	out.SetUID(u.GetUID())
	out.SetResourceVersion(u.GetResourceVersion())
	out.SetCreationTimestamp(u.GetCreationTimestamp())
	out.SetDeletionTimestamp(u.GetDeletionTimestamp())
	if uid, ok := u.GetLabels()[LabelKueueJobUID]; ok {
		out.SetLabels(map[string]string{LabelKueueJobUID: uid})
	}
	refs := u.GetOwnerReferences()
	out.SetOwnerReferences(refs)
	if !ownedByTrainJob(refs) {
		return out, nil
	}
	if active, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "active"); found {
		out.Object["spec"] = map[string]any{"active": active}
	}
	status := map[string]any{}
	for _, path := range [][]string{{"conditions"}, {"clusterName"}, {"schedulingStats", "evictions"}, {"admission", "clusterQueue"}} {
		v, found, _ := unstructured.NestedFieldNoCopy(u.Object, append([]string{"status"}, path...)...)
		if !found {
			continue
		}
		if err := unstructured.SetNestedField(status, v, path...); err != nil {
			return nil, fmt.Errorf("trimming Workload %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
	}
	if len(status) > 0 {
		out.Object["status"] = status
	}
	return out, nil
}

func ownedByTrainJob(refs []metav1.OwnerReference) bool {
	for _, ref := range refs {
		if ref.Kind == "TrainJob" && strings.HasPrefix(ref.APIVersion, trainer.GroupVersion.Group+"/") {
			return true
		}
	}
	return false
}
