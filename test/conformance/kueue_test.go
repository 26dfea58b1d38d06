package conformance_test

import (
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/realstack"
)

// The premise of the Kueue scenarios: Kueue's webhook is called, so a TrainJob created with a
// queue label and no spec.suspend comes back suspended, and Kueue's controller makes a Workload
// owned by it and admits it (the queue is free).
func TestKueueSuspendsAQueuedTrainJobAtCreation(t *testing.T) {
	t.Parallel()
	ns := stack.Namespace(t)
	q := stack.KueueQueue(t, ns, 1)
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "queued", Labels: map[string]string{trainjob.LabelKueueQueue: q}},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed", Kind: ptr.To(trainer.ClusterTrainingRuntimeKind), APIGroup: ptr.To(trainer.GroupVersion.Group)},
			Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](1), ResourcesPerNode: &corev1.ResourceRequirements{
				Limits: corev1.ResourceList{realstack.GPUResource: resource.MustParse("1")}}},
		},
	}
	require.Nil(t, tj.Spec.Suspend)
	require.NoError(t, stack.Client.Create(t.Context(), tj))
	assert.Equal(t, ptr.To(true), tj.Spec.Suspend, "Kueue's mutating webhook suspends a queued TrainJob at creation")
	require.Eventually(t, func() bool {
		w, err := trainjob.FindWorkload(t.Context(), stack.Client, tj)
		return err == nil && w != nil && w.Admitted && w.ClusterQueue == q
	}, timeout, interval, "Kueue makes a Workload owned by the TrainJob and admits it")
	require.Eventually(t, func() bool {
		got := &trainer.TrainJob{}
		require.NoError(t, stack.Client.Get(t.Context(), client.ObjectKeyFromObject(tj), got))
		return !ptr.Deref(got.Spec.Suspend, true)
	}, timeout, interval, "Kueue resumes the admitted TrainJob")
}
