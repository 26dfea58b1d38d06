package testenv

import (
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CreateTrainJobEvent records a Warning Event about tj as the Trainer controller does (for
// example TrainJobResourcesCreationFailed, which no condition records).
func CreateTrainJobEvent(t testing.TB, c client.Client, tj *trainer.TrainJob, reason, message string) {
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: tj.Name + "-", Namespace: tj.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: trainer.TrainJobKind, APIVersion: trainer.GroupVersion.String(),
			Name: tj.Name, Namespace: tj.Namespace, UID: tj.UID},
		Reason: reason, Message: message, Type: corev1.EventTypeWarning,
		LastTimestamp: metav1.Now(), Source: corev1.EventSource{Component: "trainer-controller-manager"},
	}
	t.Helper()
	require.NoError(t, c.Create(t.Context(), ev))
}

// CreateOwnedEvent records a Warning Event about an object a TrainJob owns (kind JobSet, Job or
// Pod, named name), as JobSet, the Job controller or the kubelet do.
func CreateOwnedEvent(t testing.TB, c client.Client, namespace, kind, name, reason, message string) {
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: name + "-", Namespace: namespace},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Name: name, Namespace: namespace},
		Reason:         reason, Message: message, Type: corev1.EventTypeWarning,
		LastTimestamp: metav1.Now(), Source: corev1.EventSource{Component: "test"},
	}
	t.Helper()
	require.NoError(t, c.Create(t.Context(), ev))
}
