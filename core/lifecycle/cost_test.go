package lifecycle

import (
	"context"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
)

// A step's end counts as lost the time its earlier attempts spent before this attempt's
// TrainJob: from the earliest of their jobs still there, found by their identities' names.
func TestAnEndedStepCountsEarlierAttemptsAsLost(t *testing.T) {
	failed := metav1.Condition{Type: trainer.TrainJobFailed, Status: metav1.ConditionTrue, Reason: "FailedJobs", Message: "boom"}
	job := func(attempt int, created time.Time, owner string) *trainer.TrainJob {
		id := identity()
		id.Attempt = attempt
		labels := id.Labels()
		if owner != "" {
			labels[trainjob.LabelOwnerUID] = owner // someone else's job of that name
		}
		c := failed
		c.LastTransitionTime = metav1.NewTime(created.Add(time.Minute))
		return &trainer.TrainJob{
			ObjectMeta: metav1.ObjectMeta{Name: id.Name(), Namespace: "ns", Labels: labels, CreationTimestamp: metav1.NewTime(created)},
			Status:     trainer.TrainJobStatus{Conditions: []metav1.Condition{c}},
		}
	}
	cases := map[string]struct {
		attempt int
		earlier []client.Object
		want    string
	}{
		"a first attempt lost nothing":     {attempt: 0, want: "0"},
		"from the first attempt's job":     {attempt: 2, earlier: []client.Object{job(0, t0.Add(-10*time.Minute), ""), job(1, t0.Add(-4*time.Minute), "")}, want: "600"},
		"the earliest one still there":     {attempt: 2, earlier: []client.Object{job(1, t0.Add(-4*time.Minute), "")}, want: "240"},
		"the earlier jobs are gone":        {attempt: 3, want: "0"},
		"a job of that name is not theirs": {attempt: 1, earlier: []client.Object{job(0, t0.Add(-10*time.Minute), "someone-else")}, want: "0"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, _ := engine(t, nil, append(tc.earlier, job(tc.attempt, t0, ""))...)
			e.Snapshot = func(_ context.Context, tj *trainer.TrainJob) (trainjob.Snapshot, error) {
				return trainjob.Snapshot{TrainJob: tj}, nil
			}
			id := identity()
			id.Attempt = tc.attempt
			st := e.Look(t.Context(), Step{Spec: parse(t, validStep), Namespace: "ns", Identity: id})
			require.NoError(t, st.Err)
			require.Equal(t, trainjob.PhaseFailed, st.Phase, st.Message)
			assert.Equal(t, tc.want, st.Outputs()[trainjob.OutLost])
			assert.Equal(t, "60", st.Outputs()[trainjob.OutInitializing], "this attempt never trained: all of it initializing")
		})
	}
}
