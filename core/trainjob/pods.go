package trainjob

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ListPods lists tj's pods (the JobSet names them after it) from r: the apiserver, for a face
// whose caches may not hold them.
func ListPods(ctx context.Context, r client.Reader, tj metav1.Object) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(tj.GetNamespace()), client.MatchingLabels{LabelJobSetName: tj.GetName()}); err != nil {
		return nil, fmt.Errorf("listing the pods of TrainJob %s/%s: %w", tj.GetNamespace(), tj.GetName(), err)
	}
	return pods.Items, nil
}
