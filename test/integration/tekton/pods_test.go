package tekton_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/test/internal/trainersim"
)

// The controller caches only pods carrying trainstep's labels. A TrainJob whose pods lack them
// (created before the controller labelled its pods, and still running across the upgrade) is
// still reported whole: its pods are read from the apiserver before the verdict they decide, so
// rank 0's return value is not lost.
func TestUnlabelledPodsOfAnOlderTrainJob(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	startController(t, ns)
	create(t, jaxRun(t, ns, "train", "hold", "timeout: 0s"))
	waitRun(t, ns, "train", succeeded(corev1.ConditionUnknown, "Running"))
	tj := oneTrainJob(t, ns)
	pod := &corev1.Pod{}
	require.NoError(t, c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: trainersim.PodName(tj.Name, 0)}, pod))
	require.Equal(t, tekton.Engine, pod.Labels[trainjob.LabelEngine], "the pod carries trainstep's labels through runtimePatches")
	// As an older controller's TrainJob's pods are: JobSet's labels only.
	require.NoError(t, c.Patch(t.Context(), pod, client.RawPatch(types.JSONPatchType, []byte(`[
		{"op":"remove","path":"/metadata/labels/app.kubernetes.io~1managed-by"},
		{"op":"remove","path":"/metadata/labels/trainstep.dev~1engine"},
		{"op":"remove","path":"/metadata/labels/trainstep.dev~1owner-uid"}]`))))

	require.NoError(t, sim.Finish(t.Context(), ns, tj.Name, trainersim.Behavior{Mode: trainersim.Succeed, Result: `{"w": 1.5}`}))
	run := waitRun(t, ns, "train", succeeded(corev1.ConditionTrue, tekton.ReasonSucceeded))
	v, ok := result(run, trainjob.OutResult)
	assert.True(t, ok)
	assert.JSONEq(t, `{"w": 1.5}`, v, "rank 0's return value, from a pod the cache does not hold")
}
