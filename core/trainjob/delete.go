package trainjob

import (
	"context"
	"fmt"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
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

// DeleteWithRetry deletes a TrainJob, retrying with backoff while the apiserver is unreachable
// or busy, so a deadline that fires during an outage still stops the training once it is back.
// It gives up when ctx ends, and at once on errors a retry cannot fix (forbidden, say).
func DeleteWithRetry(ctx context.Context, c client.Writer, namespace, name string) error {
	backoff := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 8, Cap: 10 * time.Second}
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		last = Delete(ctx, c, namespace, name)
		switch {
		case last == nil:
			return true, nil
		case apierrors.IsForbidden(last), apierrors.IsUnauthorized(last), apierrors.IsInvalid(last):
			return false, last
		}
		return false, nil
	})
	if err != nil && last != nil {
		return last
	}
	return err
}
