package trainjob

import (
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestReadResult(t *testing.T) {
	for name, tc := range map[string]struct {
		msg         string
		ours        bool
		value       string
		reason      string
		unconverted []string
		resumedFrom string
	}{
		"whole":                {msg: `{"trainstep.dev/result": {"a": 1}}`, ours: true, value: `{"a":1}`},
		"someone else's":       {msg: "exit 3: out of memory"},
		"someone else's JSON":  {msg: `{"status": "done"}`},
		"empty":                {msg: ""},
		"cut by the kubelet":   {msg: `{"trainstep.dev/result":{"model_uri":"s3://b/m","loss":0.`, ours: true, reason: ReasonResultTruncated},
		"cut, spaced":          {msg: ` { "trainstep.dev/result" : {"a": [1, 2`, ours: true, reason: ReasonResultTruncated},
		"cut in the marker":    {msg: `{"trainstep.dev/res`},
		"duplicate keys":       {msg: `{"trainstep.dev/result":{"1":"a","1":"b"}}`, ours: true, reason: ReasonResultInvalid},
		"nested duplicate":     {msg: `{"trainstep.dev/result":{"m":[{"x":1,"x":2}]}}`, ours: true, reason: ReasonResultInvalid},
		"same key, two levels": {msg: `{"trainstep.dev/result":{"x":{"x":1}}}`, ours: true, value: `{"x":{"x":1}}`},
		"unconverted listed": {msg: `{"trainstep.dev/result":{"o":"<Obj>","a":1},"trainstep.dev/unconverted":["o"]}`, ours: true,
			value: `{"o":"<Obj>","a":1}`, unconverted: []string{"o"}},
		"resumed": {msg: `{"trainstep.dev/result":{"a":1},"trainstep.dev/resumed-from":"/ckpt/step-40"}`, ours: true,
			value: `{"a":1}`, resumedFrom: "/ckpt/step-40"},
		"resumed, returned None":  {msg: `{"trainstep.dev/resumed-from":"/ckpt/step-40"}`, ours: true, resumedFrom: "/ckpt/step-40"},
		"resumed, duplicate keys": {msg: `{"trainstep.dev/result":{"1":"a","1":"b"},"trainstep.dev/resumed-from":"/c/step-1"}`, ours: true, reason: ReasonResultInvalid, resumedFrom: "/c/step-1"},
		"resumed from nothing":    {msg: `{"trainstep.dev/resumed-from":""}`},
	} {
		t.Run(name, func(t *testing.T) {
			r, ours := ReadResult(tc.msg)
			assert.Equal(t, tc.ours, ours)
			assert.Equal(t, tc.value, r.Value)
			assert.Equal(t, tc.reason, r.Reason)
			assert.Equal(t, tc.reason != "", r.Problem != "", r.Problem)
			assert.Equal(t, tc.unconverted, r.Unconverted)
			assert.Equal(t, tc.resumedFrom, r.ResumedFrom)
		})
	}
}

// A completed job whose result was cut fails by name, saying what the kubelet keeps for the
// pod's container count; one whose values were written as repr() succeeds with a warning.
func TestALostResultFailsTheStep(t *testing.T) {
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns"},
		Status: trainer.TrainJobStatus{Conditions: []metav1.Condition{cond("Complete", "True", "AllJobsCompleted")}}}
	done := func(msg string, sidecars int) corev1.Pod {
		p := pod("job", "node", 0, corev1.PodSucceeded)
		p.Spec.Containers = []corev1.Container{{Name: NodeContainer}}
		for range sidecars {
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "mesh"})
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: NodeContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: msg}}}}
		return p
	}
	whole := `{"trainstep.dev/result":{"model_uri":"s3://b/m","w":"` + strings.Repeat("x", 3500) + `"}}`
	o := Observe(tj, []corev1.Pod{done(whole[:3072], 3)})
	assert.Equal(t, PhaseFailed, o.Phase)
	assert.Equal(t, ReasonResultTruncated, o.Reason)
	assert.Contains(t, o.Message, "TrainJob job completed, but the training function's return value was lost")
	assert.Contains(t, o.Message, "keeps 3072 bytes of each container's termination message in a pod of 4 containers")
	assert.Contains(t, o.Message, "return their URI")
	assert.Empty(t, o.Outputs()["result"])

	// A face's cache trims the pod's spec (TrimPod): the kubelet's statuses count the containers.
	trimmed, err := TrimPod(ptr.To(done(whole[:3072], 3)))
	require.NoError(t, err)
	p := trimmed.(*corev1.Pod)
	for _, n := range []string{"proxy", "logs", "metrics"} {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: n})
	}
	o = Observe(tj, []corev1.Pod{*p})
	assert.Contains(t, o.Message, "pod job-node-0's termination message is not whole JSON (3072 bytes")
	assert.Contains(t, o.Message, "keeps 3072 bytes of each container's termination message in a pod of 4 containers")

	o = Observe(tj, []corev1.Pod{done(`{"trainstep.dev/result":{"k":1,"k":2}}`, 0)})
	assert.Equal(t, PhaseFailed, o.Phase)
	assert.Equal(t, ReasonResultInvalid, o.Reason)
	assert.Contains(t, o.Message, `the key "k" twice`)

	o = Observe(tj, []corev1.Pod{done(whole, 0)})
	assert.Equal(t, PhaseSucceeded, o.Phase)
	assert.Equal(t, "s3://b/m", o.Outputs()["result-model_uri"])

	o = Observe(tj, []corev1.Pod{done(`{"trainstep.dev/result":{"o":"<Obj>","a":1},"trainstep.dev/unconverted":["o"]}`, 0)})
	assert.Equal(t, PhaseSucceeded, o.Phase)
	assert.Contains(t, o.Message, "warning: these values of the result have no JSON form and are their repr() strings: o")
	assert.Equal(t, "1", o.Outputs()["result-a"])
}
