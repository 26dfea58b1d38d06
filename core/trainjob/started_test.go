package trainjob

import (
	"context"
	"errors"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func TestMarkStarted(t *testing.T) {
	scheme, err := NewScheme()
	require.NoError(t, err)
	at := time.Date(2026, 12, 1, 6, 2, 3, 0, time.FixedZone("CET", 3600))
	job := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns", Annotations: map[string]string{AnnotationStepKey: "k"}}}

	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(job.DeepCopy()).Build()
	require.NoError(t, MarkStarted(t.Context(), c, "ns", "job", at))
	got := &trainer.TrainJob{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(job), got))
	assert.Equal(t, map[string]string{AnnotationStepKey: "k", AnnotationStartedAt: "2026-12-01T05:02:03Z"}, got.Annotations, "merged, in UTC")
	assert.True(t, at.Equal(StartedAt(got)))

	assert.NoError(t, MarkStarted(t.Context(), c, "ns", "gone", at), "a TrainJob already gone is nothing to mark")

	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "trainer.kubeflow.org", Resource: "trainjobs"}, "job", errors.New("no patch"))
	refusing := fake.NewClientBuilder().WithScheme(scheme).WithObjects(job.DeepCopy()).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
			return forbidden
		},
	}).Build()
	err = MarkStarted(t.Context(), refusing, "ns", "job", at)
	require.ErrorIs(t, err, forbidden)
	assert.Contains(t, err.Error(), "recording that TrainJob ns/job started (annotation trainstep.dev/started-at)")
}
