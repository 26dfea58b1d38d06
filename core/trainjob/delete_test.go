package trainjob

import (
	"context"
	"errors"
	"testing"

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

func TestDeleteWithRetry(t *testing.T) {
	scheme, err := NewScheme()
	require.NoError(t, err)
	job := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns"}}
	unreachable := errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "trainer.kubeflow.org", Resource: "trainjobs"}, "job", errors.New("no"))
	cases := map[string]struct {
		failures []error
		wantErr  error
		calls    int
	}{
		"through an outage":   {failures: []error{unreachable, unreachable, unreachable}, calls: 4},
		"already gone":        {failures: nil, calls: 1},
		"forbidden: no retry": {failures: []error{forbidden}, wantErr: forbidden, calls: 1},
		"busy, then deleted":  {failures: []error{apierrors.NewTooManyRequests("busy", 1)}, calls: 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			calls := 0
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(job.DeepCopy()).WithInterceptorFuncs(interceptor.Funcs{
				Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
					calls++
					if calls <= len(tc.failures) {
						return tc.failures[calls-1]
					}
					return c.Delete(ctx, obj, opts...)
				}}).Build()
			err := DeleteWithRetry(t.Context(), c, "ns", "job")
			assert.Equal(t, tc.calls, calls)
			if tc.wantErr != nil {
				assert.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.True(t, apierrors.IsNotFound(c.Get(t.Context(), client.ObjectKeyFromObject(job), &trainer.TrainJob{})))
		})
	}
}
