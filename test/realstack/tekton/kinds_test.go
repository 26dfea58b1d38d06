package tekton_test

import (
	"fmt"
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/trainstep/trainstep/test/internal/tektonharness"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// kindSteps is one step of every builtin trainer kind (the step param), by task name.
var kindSteps = map[string]string{
	"torch":     "framework: torch\ntrainer: {numNodes: 2, func: \"def train():\\n    print('hi')\\n\"}",
	"mpi":       "framework: mpi\ntrainer: {numNodes: 2, func: \"def train():\\n    print('hi')\\n\"}",
	"deepspeed": "framework: deepspeed\ntrainer: {numNodes: 2, func: \"def train():\\n    print('hi')\\n\"}",
	"jax":       "framework: jax\ntrainer: {numNodes: 2, func: \"def train():\\n    print('hi')\\n\"}",
	"xgboost":   "framework: xgboost\ntrainer: {numNodes: 2, func: \"def train():\\n    print('hi')\\n\"}",
	"custom":    "trainer: {kind: CustomTrainer, func: \"def train():\\n    print('hi')\\n\"}",
	"container": "trainer: {kind: CustomTrainerContainer, image: busybox:1.37, command: [sh, -c], args: ['echo hi']}",
	"torchtune": "framework: torchtune\nruntime: {name: torchtune-llama3.2-1b}\ninitializer:\n  dataset: {storageUri: \"hf://tatsu-lab/alpaca\"}\ntrainer: {epochs: 1}",
}

// TestEveryTrainerKindSucceedsThroughTheRealTrainer: one PipelineRun runs a step of every
// trainer kind at once through trainstep's controller under Tekton's own, on the real Trainer;
// every CustomRun succeeds and its TrainJob is Complete.
func TestEveryTrainerKindSucceedsThroughTheRealTrainer(t *testing.T) {
	dumpOnFailure(t)
	ns := stack.Namespace(t)
	var tasks strings.Builder
	for name, step := range kindSteps {
		fmt.Fprintf(&tasks, "    - name: %s\n      taskRef: %s\n      params:\n      - name: step\n        value: |\n          %s\n",
			name, tektonharness.Ref, strings.ReplaceAll(step, "\n", "\n          "))
	}
	tektonharness.CreatePipelineRun(t, c, ns, `
apiVersion: tekton.dev/v1
kind: PipelineRun
metadata: {name: run}
spec:
  pipelineSpec:
    tasks:
`+tasks.String())
	tektonharness.WaitPipelineRun(t, c, ns, "run", "True", "Succeeded", 2*timeout)
	runs := tektonharness.CustomRuns(t, t, c, ns)
	require.Len(t, runs, len(kindSteps), "a CustomRun per trainer kind")
	for _, run := range runs {
		cond := run.Status.Succeeded()
		require.NotNil(t, cond, run.Name)
		assert.Equal(t, corev1.ConditionTrue, cond.Status, "%s: %s", run.Name, cond.Message)
	}
	tjs := testenv.TrainJobs(t.Context(), t, c, ns)
	assert.Len(t, tjs, len(kindSteps), "one TrainJob per CustomRun")
	for _, tj := range tjs {
		assert.True(t, meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete), "%s: %+v", tj.Name, tj.Status.Conditions)
	}
}
