package trainjob

import (
	"context"
	"fmt"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Cache indexes the long-running faces look things up by, instead of scanning a namespace:
// pods by their JobSet's name (the TrainJob's), Events by the TrainJobs they may be about
// (EventTrainJobs: the TrainJob's own, its JobSet's, Jobs' and pods'), TrainJobs by their
// identity's hash (trainstep.dev/step, see FindByIdentity).
const (
	IndexPodJobSet    = "jobset-name"
	IndexEventObject  = "event-trainjob"
	IndexTrainJobStep = "trainstep-step"
)

// RegisterIndexes adds the indexes to a cache (before it starts).
func RegisterIndexes(ctx context.Context, i client.FieldIndexer) error {
	if err := i.IndexField(ctx, &trainer.TrainJob{}, IndexTrainJobStep, func(o client.Object) []string {
		if s := o.GetLabels()[LabelStep]; s != "" {
			return []string{s}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing TrainJobs by step: %w", err)
	}
	if err := i.IndexField(ctx, &corev1.Pod{}, IndexPodJobSet, func(o client.Object) []string {
		if n := o.GetLabels()[LabelJobSetName]; n != "" {
			return []string{n}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing pods by JobSet: %w", err)
	}
	if err := i.IndexField(ctx, &corev1.Event{}, IndexEventObject, func(o client.Object) []string {
		e, ok := o.(*corev1.Event)
		if !ok {
			return nil
		}
		return EventTrainJobs(e)
	}); err != nil {
		return fmt.Errorf("indexing Events: %w", err)
	}
	return nil
}
