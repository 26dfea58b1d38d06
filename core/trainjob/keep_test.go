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

// A timed-out verdict with keepOnTimeout marks the job kept and frees it of its owner; one
// without deletes it; a refused patch is said in the message and ends the step all the same.
func TestConcludeKeepsOrDeletes(t *testing.T) {
	scheme, err := NewScheme()
	require.NoError(t, err)
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "trainer.kubeflow.org", Resource: "trainjobs"}, "job", errors.New("no patch"))
	cases := map[string]struct {
		keep       bool
		patchErr   error
		wantKept   bool
		wantGone   bool
		inMessage  string
		wantOwners int
	}{
		"keepOnTimeout: kept, no owner":           {keep: true, wantKept: true, inMessage: "kubectl delete trainjob job"},
		"no keepOnTimeout: deleted":               {keep: false, wantGone: true, inMessage: "it was deleted"},
		"keep refused: said, the step still ends": {keep: true, patchErr: forbidden, wantOwners: 1, inMessage: "could not be marked kept"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := followJob(cond(trainer.TrainJobComplete, metav1.ConditionFalse, "Running"))
			job.OwnerReferences = []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "Workflow", Name: "wf", UID: "u"}}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(job.DeepCopy()).WithInterceptorFuncs(interceptor.Funcs{
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
					if tc.patchErr != nil {
						return tc.patchErr
					}
					return c.Patch(ctx, obj, p, opts...)
				}}).Build()
			v := Decide(Snapshot{TrainJob: job, Now: t0.Add(2 * time.Hour)}, Deadlines{Timeout: time.Hour, KeepOnTimeout: tc.keep})
			require.Equal(t, PhaseTimedOut, v.Phase)
			assert.Equal(t, tc.keep, v.Keep)
			assert.Equal(t, !tc.keep, v.Delete)
			obs, err := Conclude(t.Context(), c, Tailer{}, v)
			require.NoError(t, err)
			assert.Contains(t, obs.Message, tc.inMessage)
			got := &trainer.TrainJob{}
			err = c.Get(t.Context(), client.ObjectKeyFromObject(job), got)
			if tc.wantGone {
				assert.True(t, apierrors.IsNotFound(err), "deleted: %v", err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantKept, Kept(got), "annotations: %v", got.Annotations)
			assert.Len(t, got.OwnerReferences, tc.wantOwners)
		})
	}
}

// DeleteUnlessKept leaves a kept job and deletes one that is not.
func TestDeleteUnlessKept(t *testing.T) {
	scheme, err := NewScheme()
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		annotations map[string]string
		deleted     bool
	}{
		"kept: left alone":  {annotations: map[string]string{AnnotationKept: "the step's timeout passed; keepOnTimeout"}},
		"not kept: deleted": {deleted: true},
	} {
		t.Run(name, func(t *testing.T) {
			job := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns", Annotations: tc.annotations}}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(job).Build()
			read := &trainer.TrainJob{}
			require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(job), read))
			deleted, err := DeleteUnlessKept(t.Context(), c, read)
			require.NoError(t, err)
			assert.Equal(t, tc.deleted, deleted)
			err = c.Get(t.Context(), client.ObjectKeyFromObject(job), &trainer.TrainJob{})
			assert.Equal(t, tc.deleted, apierrors.IsNotFound(err))
		})
	}
}
