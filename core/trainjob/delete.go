package trainjob

import (
	"context"
	"fmt"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Delete removes a TrainJob and, in the background, what the Trainer made for it.
func Delete(ctx context.Context, c client.Writer, namespace, name string) error {
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	err := c.Delete(ctx, tj, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting TrainJob %s/%s: %w", namespace, name, err)
	}
	return nil
}
