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

// TestSubmitRequests: a new job is one create and no read; a replay is the refused create and
// one read; a replay that admission refuses (a quota counts the create before the store sees the
// name) still finds its job; a refusal with no job behind it is the create's error.
func TestSubmitRequests(t *testing.T) {
	scheme, err := NewScheme()
	require.NoError(t, err)
	id := Identity{Engine: "test", OwnerUID: "uid-1", StepKey: "train"}
	mine := func() *trainer.TrainJob {
		return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: id.Name(), Namespace: "ns", Labels: id.Labels()}}
	}
	quota := apierrors.NewForbidden(schema.GroupResource{Group: trainer.GroupVersion.Group, Resource: "trainjobs"}, id.Name(), errors.New("exceeded quota"))
	cases := map[string]struct {
		existing    *trainer.TrainJob
		refuse      error // the create's error, before the store
		wantCreated bool
		wantErr     func(error) bool
		creates     int
		gets        int
	}{
		"new":                         {wantCreated: true, creates: 1},
		"replay":                      {existing: mine(), creates: 1, gets: 1},
		"replay refused by admission": {existing: mine(), refuse: quota, creates: 1, gets: 1},
		"refused, no job":             {refuse: quota, wantErr: apierrors.IsForbidden, creates: 1, gets: 1},
		"name taken": {existing: &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: id.Name(), Namespace: "ns"}},
			wantErr: func(err error) bool { return errors.Is(err, ErrNameTaken) }, creates: 1, gets: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var creates, gets int
			b := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					creates++
					if tc.refuse != nil {
						return tc.refuse
					}
					return c.Create(ctx, obj, opts...)
				},
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					gets++
					return c.Get(ctx, key, obj, opts...)
				},
			})
			if tc.existing != nil {
				b = b.WithObjects(tc.existing)
			}
			tj, created, err := Submit(t.Context(), b.Build(), mine(), id)
			assert.Equal(t, tc.creates, creates, "creates")
			assert.Equal(t, tc.gets, gets, "gets")
			if tc.wantErr != nil {
				require.Error(t, err)
				assert.True(t, tc.wantErr(err), err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantCreated, created)
			assert.Equal(t, id.Name(), tj.Name)
		})
	}
}
