package tekton

import (
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// trimTrainJob keeps of a cached TrainJob what following it reads: its identity labels, owner,
// creation time, runtime, suspend, node count and status. The trainer's command (the training
// function's source), env, initializers, runtime patches, annotations and managedFields — most
// of its bytes, held once per live step — are dropped. The controller never writes a TrainJob
// it read from the cache, so nothing dropped can be written back. Anything that is not a
// *trainer.TrainJob (a DeletedFinalStateUnknown tombstone) passes through unchanged.
func trimTrainJob(obj any) (any, error) {
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
		},
		Status: tj.Status,
	}
	if tj.Spec.Trainer != nil && tj.Spec.Trainer.NumNodes != nil {
		out.Spec.Trainer = &trainer.Trainer{NumNodes: tj.Spec.Trainer.NumNodes}
	}
	return out, nil
}
