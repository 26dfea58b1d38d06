package cli_test

import (
	"fmt"
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

// ML code returns NaN losses, numpy scalars, tuples, sets, bytes and objects. The step below
// emulates numpy's types by their protocol (numpy is not needed on the test machine: a float
// subclass like numpy.float64, item()/tolist() like numpy scalars, 0-d arrays and tensors).
// Every value with a JSON form keeps it, so result-model_uri survives a NaN next to it, and
// what has none is named, in the node's log and as a warning in the step's message.
func TestLocalResultKeepsEveryValueThatHasAJSONForm(t *testing.T) {
	r := local(t, `
framework: xgboost
trainer:
  func: |
    class float64(float):
        pass

    class Scalar:
        def __init__(self, v):
            self.v = v
        def item(self):
            return self.v
        def tolist(self):
            return self.v

    class Model:
        def __repr__(self):
            return "<Model resnet>"

    def train():
        return {"model_uri": "s3://bucket/model", "loss": float("nan"), "best": float64("inf"),
                "acc": Scalar(0.93), "zero_d": Scalar(float("-inf")), "shape": (2, 2), "tags": {"b", "a"},
                "name": b"resnet", "model": Model(), "by_epoch": {1: 0.5, 2: 0.25}}
`)
	require.Equal(t, cli.ExitSucceeded, r.code, "stderr:\n%s\nstdout:\n%s", r.stderr, r.stdout)
	assert.Equal(t, "s3://bucket/model", r.outputs["result-model_uri"])
	assert.Equal(t, "NaN", r.outputs["result-loss"])
	assert.Equal(t, "Infinity", r.outputs["result-best"])
	assert.Equal(t, "0.93", r.outputs["result-acc"])
	assert.Equal(t, "-Infinity", r.outputs["result-zero_d"])
	assert.Equal(t, "[2,2]", r.outputs["result-shape"])
	assert.Equal(t, `["a","b"]`, r.outputs["result-tags"])
	assert.Equal(t, "resnet", r.outputs["result-name"])
	assert.Equal(t, "<Model resnet>", r.outputs["result-model"])
	assert.JSONEq(t, `{"1": 0.5, "2": 0.25}`, r.outputs["result-by_epoch"])
	assert.JSONEq(t, `{"model_uri": "s3://bucket/model", "loss": "NaN", "best": "Infinity", "acc": 0.93, "zero_d": "-Infinity",
		"shape": [2, 2], "tags": ["a", "b"], "name": "resnet", "model": "<Model resnet>", "by_epoch": {"1": 0.5, "2": 0.25}}`, r.outputs["result"])
	assert.Contains(t, r.stdout, `[node-0] trainstep: result loss: NaN is written as the string "NaN"`)
	assert.Contains(t, r.stdout, "[node-0] trainstep: result model has no JSON form; it is written as its repr() string")
	assert.Contains(t, r.outputs["message"], "warning: these values of the result have no JSON form and are their repr() strings: model")
	assert.Contains(t, r.stderr, "warning: these values of the result have no JSON form")
}

// Every key of the result is an output, the 40th as the first; keys that collide once made
// strings fail the step naming both.
func TestLocalResultKeysAreAllOutputsAndNeverCollide(t *testing.T) {
	r := local(t, "framework: xgboost\ntrainer: {func: \"def train():\\n    return {'k%02d' % i: i for i in range(1, 41)}\\n\"}")
	require.Equal(t, cli.ExitSucceeded, r.code, "stderr:\n%s\nstdout:\n%s", r.stderr, r.stdout)
	for i := 1; i <= 40; i++ {
		assert.Equal(t, fmt.Sprint(i), r.outputs[fmt.Sprintf("result-k%02d", i)])
	}

	r = local(t, "framework: xgboost\ntrainer: {func: \"def train():\\n    return {'model_uri': 's3://b/m', 1: 'a', '1': 'b'}\\n\"}")
	assert.Equal(t, cli.ExitFailed, r.code, "stderr:\n%s\nstdout:\n%s", r.stderr, r.stdout)
	assert.Equal(t, "Failed", r.outputs["phase"])
	assert.Contains(t, r.outputs["message"], `the return value has the keys 1 and '1', which are both "1" in JSON; rename one of them`)
	assert.Empty(t, r.outputs["result-1"])
}

// A runtime whose trainer pod has sidecars leaves less of the kubelet's 12 KiB for the result:
// a 3 KiB result that a 4-container pod (plus room for a mesh's 2) would lose fails the node by
// name instead of succeeding with an empty result.
func TestLocalResultKeepsToWhatThePodsTerminationMessageHolds(t *testing.T) {
	ns := env.Namespace(t)
	stock := &trainer.ClusterTrainingRuntime{}
	require.NoError(t, env.Client.Get(t.Context(), client.ObjectKey{Name: "xgboost-distributed"}, stock))
	rt := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "xgboost-with-sidecars", Namespace: ns, Labels: stock.Labels}, Spec: *stock.Spec.DeepCopy()}
	for i := range rt.Spec.Template.Spec.ReplicatedJobs {
		pod := &rt.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
		if len(pod.Containers) > 0 && pod.Containers[0].Name == "node" {
			pod.Containers = append(pod.Containers, corev1.Container{Name: "log-shipper", Image: "busybox"}, corev1.Container{Name: "metrics", Image: "busybox"})
			pod.InitContainers = append(pod.InitContainers, corev1.Container{Name: "fetch-certs", Image: "busybox"})
		}
	}
	require.NoError(t, env.Client.Create(t.Context(), rt))

	step := "framework: xgboost\nruntime: {name: xgboost-with-sidecars, kind: TrainingRuntime}\ntrainer: {func: \"def train():\\n    return {'model_uri': 's3://b/m', 'notes': 'x' * 3000}\\n\"}"
	r := executor(t, "run", "--local", "--runtimes-from", "cluster", "--kubeconfig", env.Kubeconfig, "-n", ns, "-f", writeStep(t, step))
	assert.Equal(t, cli.ExitFailed, r.code, "stderr:\n%s\nstdout:\n%s", r.stderr, r.stdout)
	assert.Contains(t, r.outputs["message"], "over the 2048 this pod's termination message holds")
	assert.Contains(t, r.outputs["message"], "4 planned + 2 for a service mesh's sidecars")
	assert.Contains(t, r.outputs["message"], "return their URI")

	// What fits is the result.
	r = executor(t, "run", "--local", "--runtimes-from", "cluster", "--kubeconfig", env.Kubeconfig, "-n", ns, "-f",
		writeStep(t, strings.Replace(step, "3000", "1900", 1)))
	require.Equal(t, cli.ExitSucceeded, r.code, "stderr:\n%s\nstdout:\n%s", r.stderr, r.stdout)
	assert.Equal(t, "s3://b/m", r.outputs["result-model_uri"])
}
