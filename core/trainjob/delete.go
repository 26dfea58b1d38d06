package trainjob

import (
	"context"
	"fmt"
	"time"

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

// deleteRetryFor is how long DeleteWithRetry (and Keep) keeps trying through an apiserver outage.
const deleteRetryFor = 3 * time.Minute

// DeleteWithRetry deletes a TrainJob, retrying with back-off (200 ms doubling to 10 s) for up to
// deleteRetryFor while the apiserver is unreachable or busy, so a deadline that fires during an
// outage still stops the training once it is back. It gives up at once on errors a retry cannot
// fix (forbidden, say), and when ctx ends.
func DeleteWithRetry(ctx context.Context, c client.Writer, namespace, name string) error {
	return withRetry(ctx, func() error { return Delete(ctx, c, namespace, name) })
}

// withRetry runs op until it succeeds, fails in a way a retry cannot fix, deleteRetryFor has
// passed or ctx ends, with DeleteWithRetry's back-off.
func withRetry(ctx context.Context, op func() error) error {
	giveUp := time.Now().Add(deleteRetryFor)
	delay := 200 * time.Millisecond
	for {
		err := op()
		switch {
		case err == nil:
			return nil
		case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err), apierrors.IsInvalid(err):
			return err
		case time.Now().After(giveUp):
			return fmt.Errorf("gave up after %s: %w", deleteRetryFor, err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (still retrying when the step ended: %w)", err, context.Cause(ctx))
		case <-t.C:
		}
		delay = min(2*delay, 10*time.Second)
	}
}
