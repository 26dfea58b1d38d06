package tekton

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
)

// trimCustomRun keeps of a cached CustomRun what the reconciler reads. The cache holds every
// CustomRun of the namespaces watched, finished ones (a pipeline's history) and other custom
// tasks' included, for as long as they exist:
//   - another custom task's run keeps only its name and customRef, which the predicate reads
//     to turn it away;
//   - a finished run of ours loses its params, workspaces, results and archived attempts
//     (terminal is final: only its condition, times and terminal record are read again, and a
//     finished run's status is patched, never written whole, so what the cache lacks is kept);
//   - every run loses its annotations (Tekton copies the PipelineRun's onto each) but Tekton's
//     affinity-assistant one, which places the pods, and its managedFields: nothing else reads
//     them, and a status write does not send them back (the status subresource keeps the stored
//     metadata and spec).
func trimCustomRun(obj any) (any, error) {
	run, ok := obj.(*v1beta1.CustomRun)
	if !ok {
		return obj, nil
	}
	if !run.RefersTo(APIVersion, Kind) {
		stub := &v1beta1.CustomRun{
			TypeMeta: run.TypeMeta,
			ObjectMeta: metav1.ObjectMeta{Name: run.Name, Namespace: run.Namespace, UID: run.UID,
				ResourceVersion: run.ResourceVersion, Generation: run.Generation},
			Spec: v1beta1.CustomRunSpec{CustomRef: run.Spec.CustomRef},
		}
		if cs := run.Spec.CustomSpec; cs != nil {
			stub.Spec.CustomSpec = &v1beta1.EmbeddedCustomRunSpec{TypeMeta: cs.TypeMeta}
		}
		return stub, nil
	}
	aa := run.Annotations[AnnotationAffinityAssistant]
	run.ManagedFields, run.Annotations = nil, nil
	if aa != "" && run.Status.CompletionTime == nil {
		run.Annotations = map[string]string{AnnotationAffinityAssistant: aa}
	}
	if run.Status.CompletionTime != nil {
		run.Spec.Params, run.Spec.Workspaces = nil, nil
		run.Status.Results, run.Status.RetriesStatus = nil, nil
		if cs := run.Spec.CustomSpec; cs != nil {
			run.Spec.CustomSpec = &v1beta1.EmbeddedCustomRunSpec{TypeMeta: cs.TypeMeta}
		}
	}
	return run, nil
}
