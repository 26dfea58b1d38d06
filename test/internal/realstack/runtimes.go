package realstack

import (
	"context"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NoRetryRuntime is the name of the runtime InstallNoRetryRuntime installs.
const NoRetryRuntime = "torch-no-retry"

// InstallNoRetryRuntime installs, until the test ends, a copy of the stock torch-distributed
// ClusterTrainingRuntime whose Jobs do not retry a failed pod: with the Job default
// (backoffLimit 6, exponential back-off) a failing node is retried for minutes before the
// TrainJob fails. It returns the runtime's name.
func (s *Stack) InstallNoRetryRuntime(t testing.TB) string {
	t.Helper()
	stock := &trainer.ClusterTrainingRuntime{}
	if err := s.Client.Get(t.Context(), client.ObjectKey{Name: "torch-distributed"}, stock); err != nil {
		t.Fatalf("reading the stock torch-distributed runtime: %v", err)
	}
	rt := &trainer.ClusterTrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Name: NoRetryRuntime, Labels: stock.Labels},
		Spec:       *stock.Spec.DeepCopy(),
	}
	for i := range rt.Spec.Template.Spec.ReplicatedJobs {
		rt.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.BackoffLimit = ptr.To[int32](0)
	}
	if err := client.IgnoreAlreadyExists(s.Client.Create(t.Context(), rt)); err != nil {
		t.Fatalf("creating runtime %s: %v", rt.Name, err)
	}
	t.Cleanup(func() { _ = s.Client.Delete(context.Background(), rt) })
	return rt.Name
}
