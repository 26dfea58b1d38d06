package runtimes_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/runtimes/stock"
	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainers"
)

func rt(kind, ns, name, framework, policy string, extra ...func(*unstructured.Unstructured)) unstructured.Unstructured {
	u := unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"mlPolicy": map[string]any{"numNodes": int64(1), policy: map[string]any{}},
			"template": map[string]any{"spec": map[string]any{"replicatedJobs": []any{map[string]any{
				"name": "node",
				"template": map[string]any{
					"metadata": map[string]any{"labels": map[string]any{runtimes.AncestorLabel: "trainer"}},
					"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
						"containers": []any{map[string]any{"name": "node", "image": "img"}}}}},
				},
			}}}},
		},
	}}
	if framework != "" {
		u.SetLabels(map[string]string{runtimes.FrameworkLabel: framework})
	}
	for _, f := range extra {
		f(&u)
	}
	return u
}

func deprecated(u *unstructured.Unstructured) {
	l := u.GetLabels()
	l[runtimes.SupportLabel] = runtimes.Deprecated
	u.SetLabels(l)
}

func deleting(u *unstructured.Unstructured) {
	now := metav1.Now()
	u.SetDeletionTimestamp(&now)
	u.SetFinalizers([]string{"trainer.kubeflow.org/resource-in-use"})
}

func trainer(t *testing.T, y string) trainers.Trainer {
	t.Helper()
	s, err := step.Parse([]byte(y))
	require.NoError(t, err)
	tr, errs := trainers.Builtin().Resolve(s)
	require.Empty(t, errs)
	return tr
}

const torchStep = "framework: torch\ntrainer: {func: \"def f(): pass\"}"

func TestSelect(t *testing.T) {
	C, N := runtimes.ClusterKind, runtimes.NamespacedKind
	cases := map[string]struct {
		objs       []unstructured.Unstructured
		step       string
		name, kind string
		want       string // chosen runtime ref
		wantErr    string
		warning    string
	}{
		"one match": {objs: []unstructured.Unstructured{rt(C, "", "torch-distributed", "torch", "torch"), rt(C, "", "jax-distributed", "jax", "jax")},
			step: torchStep, want: "ClusterTrainingRuntime/torch-distributed"},
		"none": {objs: []unstructured.Unstructured{rt(C, "", "jax-distributed", "jax", "jax")}, step: torchStep,
			wantErr: `no runtime for TorchTrainer, which needs framework "torch"; available: jax-distributed (framework jax)`},
		"two": {objs: []unstructured.Unstructured{rt(C, "", "torch-a", "torch", "torch"), rt(C, "", "torch-b", "torch", "torch")}, step: torchStep,
			wantErr: `2 runtimes have framework "torch": torch-a, torch-b; pick one with runtime.name`},
		"namespaced wins a name clash": {objs: []unstructured.Unstructured{rt(N, "team", "torch-distributed", "torch", "torch"), rt(C, "", "torch-distributed", "torch", "torch")},
			step: torchStep, want: "TrainingRuntime/team/torch-distributed"},
		"unlabelled skipped, with the reason": {objs: []unstructured.Unstructured{rt(C, "", "mpi-distributed", "", "mpi")},
			step: "framework: mpi\ntrainer: {func: \"def f(): pass\"}", wantErr: "skipped: mpi-distributed (no trainer.kubeflow.org/framework label)"},
		"deepspeed falls through to torch": {objs: []unstructured.Unstructured{rt(C, "", "torch-distributed", "torch", "torch")},
			step: "framework: deepspeed\ntrainer: {func: \"def f(): pass\"}", want: "ClusterTrainingRuntime/torch-distributed"},
		"deepspeed prefers deepspeed": {objs: []unstructured.Unstructured{rt(C, "", "torch-distributed", "torch", "torch"), rt(C, "", "deepspeed-distributed", "deepspeed", "mpi")},
			step: "framework: deepspeed\ntrainer: {func: \"def f(): pass\"}", want: "ClusterTrainingRuntime/deepspeed-distributed"},
		"mpi finds the deepspeed runtime on a stock cluster": {objs: []unstructured.Unstructured{rt(C, "", "deepspeed-distributed", "deepspeed", "mpi"), rt(C, "", "mlx-distributed", "mlx", "mpi")},
			step: "framework: mpi\ntrainer: {func: \"def f(): pass\"}", want: "ClusterTrainingRuntime/deepspeed-distributed"},
		"mpi explicit: any runtime with an mpi policy": {objs: []unstructured.Unstructured{rt(C, "", "my-mpi", "custom-mpi", "mpi")},
			step: "framework: mpi\ntrainer: {func: \"def f(): pass\"}", name: "my-mpi", want: "ClusterTrainingRuntime/my-mpi"},
		"explicit, wrong framework": {objs: []unstructured.Unstructured{rt(C, "", "jax-distributed", "jax", "jax")}, step: torchStep, name: "jax-distributed",
			wantErr: "TorchTrainer supports frameworks [torch], but runtime 'jax-distributed' has framework 'jax'"},
		"explicit, wrong trainer type": {objs: []unstructured.Unstructured{rt(C, "", "torchtune-x", "torchtune", "torch")},
			step: "trainer: {kind: CustomTrainer, func: \"def f(): pass\"}", name: "torchtune-x", wantErr: "requires a runtime with trainer_type=CustomTrainer"},
		"explicit, missing": {objs: []unstructured.Unstructured{rt(C, "", "torch-distributed", "torch", "torch")}, step: torchStep, name: "nope",
			wantErr: `no runtime named "nope"; available: torch-distributed (framework torch)`},
		"explicit kind picks the cluster one": {objs: []unstructured.Unstructured{rt(N, "team", "torch-distributed", "torch", "torch"), rt(C, "", "torch-distributed", "torch", "torch")},
			step: torchStep, name: "torch-distributed", kind: C, want: "ClusterTrainingRuntime/torch-distributed"},
		"a bare name picks the namespaced one": {objs: []unstructured.Unstructured{rt(N, "team", "torch-distributed", "torch", "torch"), rt(C, "", "torch-distributed", "torch", "torch")},
			step: torchStep, name: "torch-distributed", want: "TrainingRuntime/team/torch-distributed"},
		"one being deleted is not a second match": {objs: []unstructured.Unstructured{rt(C, "", "torch-distributed", "torch", "torch"), rt(C, "", "torch-old", "torch", "torch", deleting)},
			step: torchStep, want: "ClusterTrainingRuntime/torch-distributed"},
		"one being deleted, named, says so": {objs: []unstructured.Unstructured{rt(C, "", "torch-distributed", "torch", "torch"), rt(C, "", "torch-old", "torch", "torch", deleting)},
			step: torchStep, name: "torch-old", wantErr: "torch-old cannot be used: being deleted"},
		"deprecated is warned about": {objs: []unstructured.Unstructured{rt(C, "", "torch-old", "torch", "torch", deprecated)}, step: torchStep,
			want: "ClusterTrainingRuntime/torch-old", warning: "deprecated"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sel, err := runtimes.Select(runtimes.NewCatalog(tc.objs), trainer(t, tc.step), tc.name, tc.kind)
			if tc.wantErr != "" {
				require.NotNil(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.Contains(t, err.Field, "runtime")
				return
			}
			require.Nil(t, err)
			r := sel.Runtime
			assert.Equal(t, tc.want, r.Ref())
			if tc.warning != "" {
				require.Len(t, sel.Warnings, 1)
				assert.Contains(t, sel.Warnings[0], tc.warning)
			} else {
				assert.Empty(t, sel.Warnings)
			}
		})
	}
}

func TestStockRuntimes(t *testing.T) {
	cat, err := stock.Source{}.List(t.Context(), "any")
	require.NoError(t, err)
	byName := map[string]runtimes.Runtime{}
	for _, r := range cat.Runtimes {
		byName[r.Name] = r
	}
	assert.Empty(t, cat.Skipped)
	assert.Equal(t, runtimes.PolicyTorch, byName["torch-distributed"].Policy)
	assert.Equal(t, runtimes.PolicyMPI, byName["deepspeed-distributed"].Policy)
	assert.True(t, byName["deepspeed-distributed"].RunLauncherAsNode)
	assert.Equal(t, runtimes.PolicyJAX, byName["jax-distributed"].Policy)
	assert.Equal(t, runtimes.PolicyXGBoost, byName["xgboost-distributed"].Policy)
	tune := byName["torchtune-llama3.2-1b"]
	assert.Equal(t, runtimes.BuiltinTrainer, tune.Type)
	assert.True(t, tune.HasDatasetInitializer && tune.HasModelInitializer)
	assert.Equal(t, "gpu", tune.Device)
	assert.Equal(t, "2", tune.DeviceCount)
}
