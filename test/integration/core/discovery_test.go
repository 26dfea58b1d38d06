package core_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/trainstep/trainstep/core/runtimes"
)

// namespacedRuntime copies a stock ClusterTrainingRuntime into a TrainingRuntime of ns.
func namespacedRuntime(t *testing.T, ns, from, name, framework string) {
	t.Helper()
	src := &unstructured.Unstructured{}
	src.SetAPIVersion("trainer.kubeflow.org/v1alpha1")
	src.SetKind(runtimes.ClusterKind)
	require.NoError(t, env.Client.Get(t.Context(), clientKey("", from), src))
	rt := &unstructured.Unstructured{Object: map[string]any{"spec": src.Object["spec"]}}
	rt.SetAPIVersion("trainer.kubeflow.org/v1alpha1")
	rt.SetKind(runtimes.NamespacedKind)
	rt.SetNamespace(ns)
	rt.SetName(name)
	if framework != "" {
		rt.SetLabels(map[string]string{runtimes.FrameworkLabel: framework})
	}
	require.NoError(t, env.Client.Create(t.Context(), rt))
}

func TestDiscoveryOnTheCluster(t *testing.T) {
	fn := "{func: " + pyFunc + "}"
	cases := map[string]struct {
		setup   func(t *testing.T, ns string)
		step    string
		want    string
		wantErr string
	}{
		"cluster runtime, one match": {step: "framework: jax\ntrainer: " + fn, want: "ClusterTrainingRuntime/jax-distributed"},
		"namespaced wins a name clash": {
			setup: func(t *testing.T, ns string) { namespacedRuntime(t, ns, "jax-distributed", "jax-distributed", "jax") },
			step:  "framework: jax\ntrainer: " + fn, want: "TrainingRuntime/{ns}/jax-distributed"},
		"two matches": {
			setup:   func(t *testing.T, ns string) { namespacedRuntime(t, ns, "jax-distributed", "jax-team", "jax") },
			step:    "framework: jax\ntrainer: " + fn,
			wantErr: `2 runtimes have framework "jax": jax-distributed, jax-team; pick one with runtime.name`},
		"two matches, explicit pick": {
			setup: func(t *testing.T, ns string) { namespacedRuntime(t, ns, "jax-distributed", "jax-team", "jax") },
			step:  "framework: jax\nruntime: {name: jax-team}\ntrainer: " + fn, want: "TrainingRuntime/{ns}/jax-team"},
		"no match": {step: "framework: flux\ntrainer: {kind: CustomTrainer, func: " + pyFunc + "}",
			wantErr: `no runtime for CustomTrainer, which needs framework "flux"; available: deepspeed-distributed (framework deepspeed)`},
		"unlabelled namespaced runtime is skipped with its reason": {
			setup:   func(t *testing.T, ns string) { namespacedRuntime(t, ns, "jax-distributed", "unlabelled", "") },
			step:    "framework: jax\nruntime: {name: unlabelled}\ntrainer: " + fn,
			wantErr: "TrainingRuntime unlabelled cannot be used: no trainer.kubeflow.org/framework label"},
		"deepspeed prefers its own runtime":       {step: "framework: deepspeed\ntrainer: " + fn, want: "ClusterTrainingRuntime/deepspeed-distributed"},
		"mpi finds the deepspeed runtime":         {step: "framework: mpi\ntrainer: " + fn, want: "ClusterTrainingRuntime/deepspeed-distributed"},
		"mpi explicit on mlx (mpi policy)":        {step: "framework: mpi\nruntime: {name: mlx-distributed}\ntrainer: " + fn, want: "ClusterTrainingRuntime/mlx-distributed"},
		"explicit runtime of the wrong framework": {step: "framework: jax\nruntime: {name: xgboost-distributed}\ntrainer: " + fn, wantErr: "JAXTrainer supports frameworks [jax], but runtime 'xgboost-distributed' has framework 'xgboost'"},
		"explicit runtime of the wrong type":      {step: "trainer: {kind: CustomTrainer, func: " + pyFunc + "}\nruntime: {name: torchtune-llama3.2-1b}", wantErr: "requires a runtime with trainer_type=CustomTrainer, but runtime 'torchtune-llama3.2-1b' has trainer_type=BuiltinTrainer"},
		"explicit kind reaches a hidden cluster one": {
			setup: func(t *testing.T, ns string) { namespacedRuntime(t, ns, "jax-distributed", "jax-distributed", "jax") },
			step:  "framework: jax\nruntime: {name: jax-distributed, kind: ClusterTrainingRuntime}\ntrainer: " + fn, want: "ClusterTrainingRuntime/jax-distributed"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ns := env.Namespace(t)
			if tc.setup != nil {
				tc.setup(t, ns)
			}
			p, err := planner().Plan(t.Context(), parse(t, tc.step), ns)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, replaceNS(tc.want, ns), p.Runtime.Ref())
		})
	}
}
