package tekton_test

import (
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
	"github.com/trainstep/trainstep/test/internal/tektonharness"
)

// Waits poll with these bounds; nothing sleeps to synchronise. Generous: the stack and both
// controllers share 2 cores, and kwok's stages have delays of a few seconds each.
const (
	timeout  = 3 * time.Minute
	interval = 200 * time.Millisecond
)

// pipelineRun creates PipelineRun "run" in ns: one trainstep task whose whole step is the step
// param (YAML), its results those of the Pipeline.
func pipelineRun(t *testing.T, ns, step string) {
	t.Helper()
	tektonharness.CreateStepPipelineRun(t, c, ns, "run", step)
}

// customRun is the namespace's one CustomRun (Tekton's controller creates it).
func customRun(ct require.TestingT, t *testing.T, ns string) *v1beta1.CustomRun {
	runs := tektonharness.CustomRuns(ct, t, c, ns)
	require.Len(ct, runs, 1)
	return &runs[0]
}

func results(run *v1beta1.CustomRun) map[string]string {
	out := map[string]string{}
	for _, r := range run.Status.Results {
		out[r.Name] = r.Value
	}
	return out
}

// TestTorchStepSucceedsThroughTheRealTrainer: a 2-node torch step goes through the Trainer's
// and JobSet's webhooks and controllers, the Job controller and the scheduler onto kwok Nodes;
// the CustomRun succeeds with trainstep's results, and they reach the PipelineRun's.
func TestTorchStepSucceedsThroughTheRealTrainer(t *testing.T) {
	dumpOnFailure(t)
	ns := stack.Namespace(t)
	pipelineRun(t, ns, `
framework: torch
trainer:
  numNodes: 2
  env: {KWOK_RUN_SECONDS: "2"}
  func: |
    def train():
        print("hello from the real stack")
`)
	pr := tektonharness.WaitPipelineRun(t, c, ns, "run", "True", "Succeeded", timeout)
	run := customRun(t, t, ns)
	res := results(run)
	name := res[trainjob.OutName]
	require.NotEmpty(t, name, "results: %v", res)
	assert.Equal(t, "Succeeded", res[trainjob.OutPhase])
	assert.Equal(t, "2", res[trainjob.OutNumNodes])
	assert.Equal(t, "torch-distributed", res[trainjob.OutRuntime])
	prResults, _, _ := unstructured.NestedSlice(pr.Object, "status", "results")
	got := map[string]string{}
	for _, r := range prResults {
		m, _ := r.(map[string]any)
		got[m["name"].(string)], _ = m["value"].(string)
	}
	assert.Equal(t, map[string]string{"trainjob-name": name, "phase": "Succeeded", "num-nodes": "2"}, got)

	// The real Trainer says Complete, and its pods were Job pods of the JobSet on kwok Nodes.
	tj := &trainer.TrainJob{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, tj))
	assert.True(t, meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete), "%+v", tj.Status.Conditions)
	assert.Equal(t, run.UID, tj.OwnerReferences[0].UID, "the CustomRun owns the TrainJob")
	pods := &corev1.PodList{}
	require.NoError(t, c.List(t.Context(), pods, client.InNamespace(ns), client.MatchingLabels{"jobset.sigs.k8s.io/jobset-name": name}))
	require.Len(t, pods.Items, 2)
	for _, p := range pods.Items {
		assert.Contains(t, stack.Nodes, p.Spec.NodeName, "pod %s", p.Name)
		assert.Equal(t, corev1.PodSucceeded, p.Status.Phase, "pod %s", p.Name)
	}
}
