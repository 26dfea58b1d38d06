package argo_test

import (
	"fmt"
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/argoharness"
)

// kindSteps is one step of every builtin trainer kind (the plugin's fields), by task name.
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

// TestEveryTrainerKindSucceedsThroughTheRealTrainer: one Workflow whose DAG runs a step of every
// trainer kind at once through the plugin, under Argo's own controller and agent, on the real
// Trainer; every node succeeds with its TrainJob Complete (torchtune with its initializers, its
// JobSet named within JobSet's limits for an Argo node name).
func TestEveryTrainerKindSucceedsThroughTheRealTrainer(t *testing.T) {
	var tasks, templates strings.Builder
	for name, step := range kindSteps {
		fmt.Fprintf(&tasks, "          - {name: %s, template: %s}\n", name, name)
		fmt.Fprintf(&templates, "    - name: %s\n      plugin:\n        trainstep:\n          key: \"{{node.name}}\"\n          %s\n",
			name, strings.ReplaceAll(step, "\n", "\n          "))
	}
	// Not the example's train-dag-: this suite serves that workflow's pods and its TrainJobs'
	// (exampleServedPods), and these trainers' pods are kwok's.
	wf := harness.Submit(t, `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: every-kind-}
spec:
  entrypoint: main
  serviceAccountName: trainstep-workflow
  templates:
    - name: main
      dag:
        tasks:
`+tasks.String()+templates.String())
	harness.RunAgent(t, wf.Name, timeout)
	got := harness.WaitPhase(t, wf.Name, 2*timeout)
	require.Equal(t, wfv1.WorkflowSucceeded, got.Status.Phase, "%s\n%s", got.Status.Message, argoharness.Nodes(got))
	seen := map[string]bool{}
	for _, n := range got.Status.Nodes {
		if n.Type != wfv1.NodeTypePlugin {
			continue
		}
		seen[n.DisplayName] = true
		assert.Equal(t, wfv1.NodeSucceeded, n.Phase, "%s: %s", n.DisplayName, n.Message)
	}
	assert.Len(t, seen, len(kindSteps), "a node per trainer kind")
	tjs := trainJobs(t, got)
	assert.Len(t, tjs, len(kindSteps), "one TrainJob per node")
	for _, tj := range tjs {
		assert.True(t, meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete),
			"%s (%s): %+v", tj.Name, tj.Annotations[trainjob.AnnotationStepKey], tj.Status.Conditions)
	}
}
