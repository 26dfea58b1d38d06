package trainjob

import (
	"slices"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/trainstep/trainstep/core/trainers"
)

func TestResumeOutputsAndMessage(t *testing.T) {
	cases := map[string]struct {
		obs         Observation
		wantOutputs map[string]string // nil: neither output
		wantNote    string
	}{
		"a face that does not know the attempt": {obs: Observation{ResumedFrom: "/ckpt/step-400"}, wantNote: "resumed from step 400"},
		"first attempt, nothing to resume":      {obs: Observation{Attempt: ptr.To(0)}, wantOutputs: map[string]string{OutAttempt: "0", OutResumedFrom: ""}},
		"retry resumed from the helper's": {obs: Observation{Attempt: ptr.To(2), ResumedFrom: "/ckpt/step-400"},
			wantOutputs: map[string]string{OutAttempt: "2", OutResumedFrom: "/ckpt/step-400"}, wantNote: "resumed from step 400 (attempt 2)"},
		"retry resumed from Hugging Face's": {obs: Observation{Attempt: ptr.To(1), ResumedFrom: "/ckpt/checkpoint-1500"},
			wantOutputs: map[string]string{OutAttempt: "1", OutResumedFrom: "/ckpt/checkpoint-1500"}, wantNote: "resumed from step 1500 (attempt 1)"},
		"a directory of another name": {obs: Observation{Attempt: ptr.To(1), ResumedFrom: "/ckpt/best"},
			wantOutputs: map[string]string{OutAttempt: "1", OutResumedFrom: "/ckpt/best"}, wantNote: "resumed from /ckpt/best (attempt 1)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.obs.Name, tc.obs.NumNodes, tc.obs.RunningNodes = "job", 2, 2
			out := tc.obs.Outputs()
			names := OrderedNames(out)
			assert.Equal(t, OutputNames, names[:len(OutputNames)], "the outputs every face writes come first")
			if tc.wantOutputs == nil {
				assert.NotContains(t, out, OutAttempt)
				assert.NotContains(t, out, OutResumedFrom)
				assert.Len(t, names, len(OutputNames))
			} else {
				for k, v := range tc.wantOutputs {
					assert.Equal(t, v, out[k], k)
				}
				assert.Equal(t, ResumeOutputNames, names[len(OutputNames):], "then the resume outputs, before any result-<key>")
			}
			assert.Equal(t, tc.wantNote, tc.obs.ResumeNote())
			msg := tc.obs.RunningMessage()
			if tc.wantNote == "" {
				assert.Equal(t, "TrainJob job is running: 2/2 nodes", msg)
			} else {
				assert.Equal(t, "TrainJob job is running: 2/2 nodes; "+tc.wantNote, msg)
			}
		})
	}
}

func TestResumeOutputsComeBeforeResultKeys(t *testing.T) {
	obs := Observation{Attempt: ptr.To(1), Result: `{"attempt": 5, "zeta": 1}`}
	names := OrderedNames(obs.Outputs())
	assert.Equal(t, []string{OutAttempt, OutResumedFrom, "result-attempt", "result-zeta"}, names[len(OutputNames):])
	assert.False(t, slices.Contains(OutputNames, OutAttempt), "not an output every face writes")
}

// The checkpoint rank 0 reported with its progress is its name while the job runs; the path in
// its termination message replaces it once the job ends. It is never one of the metrics.
func TestObserveReadsTheCheckpointAJobResumedFrom(t *testing.T) {
	status := &trainer.TrainerStatus{Metrics: []trainer.Metric{{Name: trainers.ResumedFromMetric, Value: "step-400"}}}
	for name, tc := range map[string]struct {
		message string // node 0's termination message
		want    string
	}{
		"running":  {want: "step-400"},
		"finished": {message: `{"trainstep.dev/result":1,"trainstep.dev/resumed-from":"/ckpt/step-400"}`, want: "/ckpt/step-400"},
	} {
		t.Run(name, func(t *testing.T) {
			tj := &trainer.TrainJob{
				ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns", Labels: map[string]string{LabelAttempt: "2"}},
				Spec:       trainer.TrainJobSpec{Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](1)}},
				Status:     trainer.TrainJobStatus{TrainerStatus: status},
			}
			var state corev1.ContainerState
			if tc.message != "" {
				state.Terminated = &corev1.ContainerStateTerminated{Message: tc.message}
			}
			pod := corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "job-node-0-0", Namespace: "ns", Labels: map[string]string{
					LabelJobSetName: "job", LabelReplicatedJob: NodeJob, LabelCompletionIndex: "0"}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: NodeContainer, State: state}}},
			}
			o := Observe(tj, []corev1.Pod{pod})
			assert.Equal(t, tc.want, o.ResumedFrom)
			assert.Nil(t, o.Metrics)
			assert.Empty(t, o.MetricsLine())
			// The attempt is the job's own label: no face has to patch it into the message.
			assert.Equal(t, "resumed from step 400 (attempt 2)", o.ResumeNote())
			if tc.message == "" {
				assert.Equal(t, "TrainJob job is running: 1/1 nodes; resumed from step 400 (attempt 2)", o.Message)
			}
		})
	}
}
