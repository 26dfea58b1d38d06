package realstack_test

import (
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/internal/cli"
)

// sidecarRuntime installs in ns a copy of the stock torch-distributed runtime whose node pods
// run three sidecar containers next to the trainer: four containers, of whose termination
// messages the kubelet keeps 12288 ÷ 4 = 3072 bytes each.
func sidecarRuntime(t *testing.T, ns string) string {
	t.Helper()
	stock := &trainer.ClusterTrainingRuntime{}
	require.NoError(t, stack.Client.Get(t.Context(), client.ObjectKey{Name: "torch-distributed"}, stock))
	rt := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch-sidecars", Namespace: ns, Labels: stock.Labels}, Spec: *stock.Spec.DeepCopy()}
	found := false
	for i := range rt.Spec.Template.Spec.ReplicatedJobs {
		pod := &rt.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
		if len(pod.Containers) == 0 || pod.Containers[0].Name != "node" {
			continue
		}
		for _, name := range []string{"mesh-proxy", "log-shipper", "metrics"} {
			pod.Containers = append(pod.Containers, corev1.Container{Name: name, Image: pod.Containers[0].Image, Command: []string{"sleep", "infinity"}})
		}
		found = true
	}
	require.True(t, found, "torch-distributed has a node job")
	require.NoError(t, stack.Client.Create(t.Context(), rt))
	return rt.Name
}

// A result the kubelet cut (kwok reports what KWOK_TERMINATION_MESSAGE holds: the first 3072
// bytes of a 3.5 KiB result, what a real kubelet keeps on this 4-container pod) fails the step
// by name, saying what the kubelet keeps for the pod, instead of succeeding with an empty
// result. The script, sized from the runtime, would have refused it on the node already.
func TestACutResultFailsTheStepByName(t *testing.T) {
	t.Parallel()
	ns := stack.Namespace(t)
	rt := sidecarRuntime(t, ns)
	whole := `{"trainstep.dev/result":{"model_uri":"s3://bucket/model","notes":"` + strings.Repeat("x", 3500) + `"}}`
	r := executor(t, ns, `
framework: torch
runtime: {name: `+rt+`, kind: TrainingRuntime}
trainer:
  env:
    KWOK_TERMINATION_MESSAGE: '`+whole[:3072]+`'
  func: |
    def train():
        return {"model_uri": "s3://bucket/model", "notes": "x" * 3500}
timeout: 3m
`)
	assert.Equal(t, cli.ExitFailed, r.Code, "stderr:\n%s\nstdout:\n%s", r.Stderr, r.Stdout)
	assert.Equal(t, "Failed", r.Outputs["phase"])
	assert.Equal(t, "ResultTruncated", r.Outputs["reason"])
	assert.Contains(t, r.Outputs["message"], "completed, but the training function's return value was lost")
	assert.Contains(t, r.Outputs["message"], "the kubelet keeps 3072 bytes of each container's termination message in a pod of 4 containers")
	assert.Contains(t, r.Outputs["message"], "return their URI")
	assert.Empty(t, r.Outputs["result"])
	assert.Empty(t, r.Outputs["result-model_uri"])

	// The command the Trainer runs keeps the result to what this pod holds with a mesh's two
	// more containers: 12288 ÷ 6.
	tjs := &trainer.TrainJobList{}
	require.NoError(t, stack.Client.List(t.Context(), tjs, client.InNamespace(ns)))
	require.Len(t, tjs.Items, 1)
	require.NotNil(t, tjs.Items[0].Spec.Trainer)
	assert.Contains(t, strings.Join(tjs.Items[0].Spec.Trainer.Command, " "), "if len(data) > 2048:")
}
