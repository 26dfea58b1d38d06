package lifecycle

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

	"github.com/trainstep/trainstep/core/trainjob"
)

// A look past the timeout with keepOnTimeout marks the job kept and frees it of its owner; one
// without deletes it; a refused keep or delete is said in the message and ends the step all the
// same (asking again would get the same 403).
func TestLookKeepsOrDeletesAtTheTimeout(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "trainer.kubeflow.org", Resource: "trainjobs"}, "job", errors.New("no patch"))
	cases := map[string]struct {
		keep       bool
		patchErr   error
		deleteErr  error
		wantKept   bool
		wantGone   bool
		inMessage  string
		wantOwners int
	}{
		"keepOnTimeout: kept, no owner":           {keep: true, wantKept: true, inMessage: "kubectl delete trainjob"},
		"no keepOnTimeout: deleted":               {keep: false, wantGone: true, inMessage: "it was deleted"},
		"keep refused: said, the step still ends": {keep: true, patchErr: forbidden, wantOwners: 1, inMessage: "could not be marked kept"},
		"delete refused: said, the step still ends": {keep: false, deleteErr: forbidden, wantOwners: 1,
			inMessage: "trainstep may not delete it, so it may still be running"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, _ := engine(t, nil)
			job := ownJob()
			job.OwnerReferences = []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "Workflow", Name: "wf", UID: "u"}}
			scheme, err := trainjob.NewScheme()
			require.NoError(t, err)
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(job).WithInterceptorFuncs(interceptor.Funcs{
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
					if tc.patchErr != nil {
						return tc.patchErr
					}
					return c.Patch(ctx, obj, p, opts...)
				},
				Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
					if tc.deleteErr != nil {
						return tc.deleteErr
					}
					return c.Delete(ctx, obj, opts...)
				}}).Build()
			e.Cache, e.API, e.Writer = c, c, c
			st := e.Look(t.Context(), Step{Spec: parse(t, validStep), Namespace: "ns", Identity: identity(),
				Deadlines: trainjob.Deadlines{Timeout: 30 * time.Minute, KeepOnTimeout: tc.keep}})
			require.NoError(t, st.Err)
			require.Equal(t, trainjob.PhaseTimedOut, st.Phase, st.Message)
			assert.True(t, st.Done())
			assert.Equal(t, tc.wantGone, st.Deleted)
			assert.Equal(t, tc.wantKept, st.Kept)
			assert.Contains(t, st.Message, tc.inMessage)
			got := &trainer.TrainJob{}
			err = c.Get(t.Context(), client.ObjectKeyFromObject(job), got)
			if tc.wantGone {
				assert.True(t, apierrors.IsNotFound(err), "deleted: %v", err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantKept, trainjob.Kept(got), "annotations: %v", got.Annotations)
			assert.Len(t, got.OwnerReferences, tc.wantOwners)
		})
	}
}
