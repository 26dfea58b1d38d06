package trainjob

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A TrainJob has started when one of its initializer pods has been Running or Succeeded, or
// when every trainer node (TrainerPods) has been Running or Succeeded at once. startTimeout
// bounds only the time until then: once started, a node that is evicted, OOM-killed, retried by
// its Job or restarted by JobSet is reported while the step waits, never failed as "not
// started". What a face saw is recorded on the TrainJob (AnnotationStartedAt) because the pods
// show only the present: a restarted face sees a replaced node's pod pending and nothing else.

// Replicated jobs the Trainer's runtimes use for initializers (the Trainer's constants).
const (
	DatasetInitializerJob = "dataset-initializer"
	ModelInitializerJob   = "model-initializer"
)

// StartedAt is when the TrainJob was recorded started (AnnotationStartedAt); zero when it was not
// or the value is not a time.
func StartedAt(tj *trainer.TrainJob) time.Time {
	v, ok := tj.Annotations[AnnotationStartedAt]
	if !ok {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}
	}
	return t
}

// MarkStarted records on the TrainJob that it started at t, with one merge patch of its
// annotations (a Verdict's MarkStarted). A TrainJob already gone is nothing to mark. A failure
// is not the step's: the caller logs it and the next look asks again.
func MarkStarted(ctx context.Context, c client.Writer, namespace, name string, t time.Time) error {
	err := patchMetadata(ctx, c, namespace, name, map[string]any{
		"annotations": map[string]string{AnnotationStartedAt: t.UTC().Format(time.RFC3339)},
	})
	if err != nil {
		return fmt.Errorf("recording that TrainJob %s/%s started (annotation %s): %w", namespace, name, AnnotationStartedAt, err)
	}
	return nil
}

// patchMetadata merges metadata into a TrainJob's with one merge patch; a TrainJob already gone
// is no error (there is nothing left to record on).
func patchMetadata(ctx context.Context, c client.Writer, namespace, name string, metadata map[string]any) error {
	patch, err := json.Marshal(map[string]any{"metadata": metadata})
	if err != nil {
		return fmt.Errorf("encoding the patch: %w", err)
	}
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := c.Patch(ctx, tj, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
