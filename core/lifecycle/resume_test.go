package lifecycle

import (
	"context"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainers"
	"github.com/trainstep/trainstep/core/trainjob"
)

// A step that names a checkpoint says, on every look, which attempt it is, and once it ends,
// what it resumed from (rank 0's termination message); a step without one says neither.
func TestAStepThatCheckpointsSaysItsAttemptAndWhatItResumedFrom(t *testing.T) {
	const checkpointed = validStep + "checkpoint: {uri: 's3://bucket/runs'}\n"
	id := identity()
	id.Attempt = 2
	complete := metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "JobsCompleted",
		Message: "jobset completed", LastTransitionTime: metav1.NewTime(t0.Add(time.Minute))}
	done := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: id.Name(), Namespace: "ns", Labels: id.Labels(), CreationTimestamp: metav1.NewTime(t0)},
		Status:     trainer.TrainJobStatus{Conditions: []metav1.Condition{complete}},
	}
	node0 := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: id.Name() + "-node-0-0", Namespace: "ns", Labels: map[string]string{
			trainjob.LabelJobSetName: id.Name(), trainjob.LabelReplicatedJob: trainjob.NodeJob, trainjob.LabelCompletionIndex: "0"}},
		Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: trainjob.NodeContainer,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				Message: `{"trainstep.dev/result":{"loss":0.25},"trainstep.dev/resumed-from":"/ckpt/step-40"}`}}}}},
	}
	cases := map[string]struct {
		spec        string
		existing    []client.Object
		attempt     string // the attempt output; "" when there is none
		resumedFrom string
		message     string
	}{
		"checkpointed, submitted":   {spec: checkpointed, attempt: "2", message: "is starting"},
		"checkpointed, resumed":     {spec: checkpointed, existing: []client.Object{done}, attempt: "2", resumedFrom: "/ckpt/step-40", message: "; resumed from step 40 (attempt 2)"},
		"not checkpointed":          {spec: validStep, message: "is starting"},
		"not checkpointed, resumed": {spec: validStep, existing: []client.Object{done}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, _ := engine(t, nil, tc.existing...)
			e.Snapshot = func(_ context.Context, tj *trainer.TrainJob) (trainjob.Snapshot, error) {
				return trainjob.Snapshot{TrainJob: tj, Pods: []corev1.Pod{node0}}, nil
			}
			st := e.Look(t.Context(), Step{Spec: parse(t, tc.spec), Namespace: "ns", Identity: id})
			require.NoError(t, st.Err)
			assert.Contains(t, st.Message, tc.message)
			out := st.Outputs()
			if tc.attempt == "" {
				assert.Nil(t, st.Attempt)
				assert.NotContains(t, out, trainjob.OutAttempt)
				assert.NotContains(t, out, trainjob.OutResumedFrom)
				assert.NotContains(t, st.Message, "resumed from")
				return
			}
			assert.Equal(t, tc.attempt, out[trainjob.OutAttempt])
			assert.Equal(t, tc.resumedFrom, out[trainjob.OutResumedFrom])
			assert.Contains(t, out, trainjob.OutResumedFrom, "written, empty, when nothing was resumed")
		})
	}
}

// While a resumed step trains, its message says what it resumed from and which attempt it is:
// rank 0 reported the checkpoint's name with its progress (the Trainer's status server), long
// before its termination message names the path.
func TestARunningResumedStepSaysWhatItResumedFrom(t *testing.T) {
	id := identity()
	id.Attempt = 2
	node0 := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: id.Name() + "-node-0-0", Namespace: "ns", Labels: map[string]string{
			trainjob.LabelJobSetName: id.Name(), trainjob.LabelReplicatedJob: trainjob.NodeJob, trainjob.LabelCompletionIndex: "0"}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: trainjob.NodeContainer}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	loss := trainer.Metric{Name: "loss", Value: "0.31"}
	for name, tc := range map[string]struct {
		metrics []trainer.Metric
		want    string
	}{
		"resumed":           {metrics: []trainer.Metric{{Name: trainers.ResumedFromMetric, Value: "step-400"}, loss}, want: "running: 1/1 nodes; resumed from step 400 (attempt 2) · "},
		"nothing to resume": {metrics: []trainer.Metric{loss}, want: "running: 1/1 nodes · "},
	} {
		t.Run(name, func(t *testing.T) {
			running := &trainer.TrainJob{
				ObjectMeta: metav1.ObjectMeta{Name: id.Name(), Namespace: "ns", Labels: id.Labels(), CreationTimestamp: metav1.NewTime(t0)},
				Spec:       trainer.TrainJobSpec{Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](1)}},
				Status:     trainer.TrainJobStatus{TrainerStatus: &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](45), Metrics: tc.metrics}},
			}
			e, _ := engine(t, nil, running)
			e.Snapshot = func(_ context.Context, tj *trainer.TrainJob) (trainjob.Snapshot, error) {
				return trainjob.Snapshot{TrainJob: tj, Pods: []corev1.Pod{node0}}, nil
			}
			spec := parse(t, validStep+"checkpoint: {uri: 's3://bucket/runs'}\n")
			st := e.Look(t.Context(), Step{Spec: spec, Namespace: "ns", Identity: id})
			require.NoError(t, st.Err)
			assert.Equal(t, trainjob.PhaseRunning, st.Phase)
			assert.Contains(t, st.Message, tc.want)
			assert.Contains(t, st.Message, "loss=0.31")
			assert.NotContains(t, st.Message, trainers.ResumedFromMetric, "trainstep's note, not one of the function's metrics")
			assert.Equal(t, []string{"loss"}, st.MetricOrder)
		})
	}
}
