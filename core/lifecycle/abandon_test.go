package lifecycle

import (
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
)

// Abandon deletes the job of a stopped pipeline only while it trains and nobody kept it, and
// never one that changed since it was read.
func TestAbandonDeletesOnlyAJobStillTrainingAndNotKept(t *testing.T) {
	complete := metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "AllJobsCompleted", LastTransitionTime: metav1.NewTime(t0)}
	cases := map[string]struct {
		job         func(*trainer.TrainJob)
		staleRead   bool // a keep (or any write) lands between the read and the delete
		wantDeleted bool
		wantGone    bool
		wantErr     func(error) bool
	}{
		"training: deleted": {wantDeleted: true, wantGone: true},
		"kept past its timeout: left": {job: func(tj *trainer.TrainJob) {
			tj.Annotations = map[string]string{trainjob.AnnotationKept: "keepOnTimeout"}
		}},
		"ended: left, with its outputs":                   {job: func(tj *trainer.TrainJob) { tj.Status.Conditions = []metav1.Condition{complete} }},
		"changed since read: a Conflict, nothing deleted": {staleRead: true, wantErr: apierrors.IsConflict},
		"held by itself only: deleted": {job: func(tj *trainer.TrainJob) {
			k, v := identity().HoldLabel()
			tj.Labels[k] = v
		}, wantDeleted: true, wantGone: true},
		"followed by another pipeline's step: let go of, left running": {job: func(tj *trainer.TrainJob) {
			k, v := identity().HoldLabel()
			tj.Labels[k] = v
			tj.Labels[trainjob.HoldKey("uid-2")] = "0123456789abcdef"
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := ownJob()
			if tc.job != nil {
				tc.job(job)
			}
			_, c := engine(t, nil, job)
			read := &trainer.TrainJob{}
			require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(job), read))
			if tc.staleRead {
				fresh := read.DeepCopy()
				fresh.Annotations = map[string]string{trainjob.AnnotationKept: "keepOnTimeout"}
				require.NoError(t, c.Update(t.Context(), fresh))
			}
			deleted, err := Abandon(t.Context(), c, read, identity().OwnerUID)
			if tc.wantErr != nil {
				require.Error(t, err)
				assert.True(t, tc.wantErr(err), "got %v", err)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.wantDeleted, deleted)
			err = c.Get(t.Context(), client.ObjectKeyFromObject(job), &trainer.TrainJob{})
			assert.Equal(t, tc.wantGone, apierrors.IsNotFound(err), "job gone")
		})
	}
	t.Run("being deleted or gone: nothing to do", func(t *testing.T) {
		_, c := engine(t, nil)
		job := ownJob()
		deleted, err := Abandon(t.Context(), c, job, identity().OwnerUID)
		require.NoError(t, err)
		assert.False(t, deleted)
		now := metav1.NewTime(t0.Add(time.Minute))
		job.DeletionTimestamp = &now
		deleted, err = Abandon(t.Context(), c, job, identity().OwnerUID)
		require.NoError(t, err)
		assert.False(t, deleted)
	})
}
