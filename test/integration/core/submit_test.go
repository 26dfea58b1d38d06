package core_test

import (
	"errors"
	"sync"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

const pyFunc = `"def train(lr=0.1):\n    print('lr', lr)\n"`

// Every trainer's TrainJob is accepted by the real CRD schema and CEL rules, and reads back as built.
func TestEveryTrainerSubmits(t *testing.T) {
	ns := env.Namespace(t)
	cases := map[string]struct {
		step    string
		runtime string
		check   func(t *testing.T, tr *trainer.Trainer)
	}{
		"TorchTrainer": {step: "framework: torch\ntrainer: {func: " + pyFunc + ", numNodes: 2, numProcPerNode: 4, maxRestarts: 3, resourcesPerNode: {cpu: 2, gpu: 1}}",
			runtime: "torch-distributed", check: func(t *testing.T, tr *trainer.Trainer) {
				assert.Equal(t, int32(2), *tr.NumNodes)
				assert.Equal(t, int32(4), *tr.NumProcPerNode)
				assert.Contains(t, tr.Env, corev1.EnvVar{Name: "PET_MAX_RESTARTS", Value: "3"})
				assert.Equal(t, "1", ptr.To(tr.ResourcesPerNode.Limits["nvidia.com/gpu"]).String())
			}},
		"MPITrainer": {step: "framework: mpi\ntrainer: {func: " + pyFunc + ", numProcPerNode: 2}", runtime: "deepspeed-distributed",
			check: func(t *testing.T, tr *trainer.Trainer) { assert.Equal(t, "mpirun", tr.Command[0]) }},
		"JAXTrainer":     {step: "framework: jax\ntrainer: {func: " + pyFunc + "}", runtime: "jax-distributed"},
		"XGBoostTrainer": {step: "framework: xgboost\ntrainer: {func: " + pyFunc + ", numNodes: 3}", runtime: "xgboost-distributed"},
		"DeepSpeedTrainer": {step: "framework: deepspeed\ntrainer: {func: " + pyFunc + ", deepspeedConfig: {zero_optimization: {stage: 2}}}", runtime: "deepspeed-distributed",
			check: func(t *testing.T, tr *trainer.Trainer) {
				assert.Contains(t, tr.Env, corev1.EnvVar{Name: "DEEPSPEED_CONFIG", Value: `{"zero_optimization":{"stage":2}}`})
			}},
		"CustomTrainer": {step: "framework: torch\ntrainer: {kind: CustomTrainer, func: " + pyFunc + "}", runtime: "torch-distributed"},
		"CustomTrainerContainer": {step: "trainer: {kind: CustomTrainerContainer, image: ghcr.io/me/t:1, command: [python, /app/train.py], args: [--epochs, '3']}", runtime: "torch-distributed",
			check: func(t *testing.T, tr *trainer.Trainer) {
				assert.Equal(t, "ghcr.io/me/t:1", *tr.Image)
				assert.Equal(t, []string{"--epochs", "3"}, tr.Args)
			}},
		"TorchTuneTrainer": {step: "framework: torchtune\nruntime: {name: torchtune-llama3.2-1b}\ntrainer: {epochs: 1}\ninitializer: {dataset: {storageUri: 'hf://tatsu-lab/alpaca'}}", runtime: "torchtune-llama3.2-1b",
			check: func(t *testing.T, tr *trainer.Trainer) {
				assert.Equal(t, []string{"tune", "run"}, tr.Command, "the Trainer's torchtune entry point, so its torchtune handling applies")
				assert.Contains(t, tr.Args, "epochs=1")
			}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := plan(t, ns, tc.step+"\nlabels: {sim-mode: hold}")
			id := identity(t, name)
			_, created, err := trainjob.Submit(t.Context(), env.Client, p.TrainJob(id), id)
			require.NoError(t, err, "the apiserver must accept the TrainJob")
			require.True(t, created)
			got := &trainer.TrainJob{}
			require.NoError(t, env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: id.Name()}, got))
			assert.Equal(t, tc.runtime, got.Spec.RuntimeRef.Name)
			assert.Equal(t, "ClusterTrainingRuntime", *got.Spec.RuntimeRef.Kind)
			assert.Equal(t, name, got.Annotations[trainjob.AnnotationTrainer])
			assert.True(t, id.Owns(got.Labels))
			if tc.check != nil {
				tc.check(t, got.Spec.Trainer)
			}
		})
	}
}

func TestReplayFindsTheSameTrainJob(t *testing.T) {
	ns := env.Namespace(t)
	p := plan(t, ns, "framework: torch\nlabels: {sim-mode: hold}\ntrainer: {func: "+pyFunc+"}")
	id := identity(t, "train")
	var wg sync.WaitGroup
	names := make([]string, 50)
	created := make([]bool, 50)
	errs := make([]error, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tj, c, err := trainjob.Submit(t.Context(), env.Client, p.TrainJob(id), id)
			errs[i], created[i] = err, c
			if err == nil {
				names[i] = tj.Name
			}
		}()
	}
	wg.Wait()
	nCreated := 0
	for i := range 50 {
		require.NoError(t, errs[i])
		assert.Equal(t, id.Name(), names[i])
		if created[i] {
			nCreated++
		}
	}
	assert.Equal(t, 1, nCreated, "exactly one submit creates")
	assert.Len(t, testenv.TrainJobs(t.Context(), t, env.Client, ns), 1)

	// A retry is a new attempt: a fresh TrainJob.
	retry := id
	retry.Attempt = 1
	tj, c, err := trainjob.Submit(t.Context(), env.Client, p.TrainJob(retry), retry)
	require.NoError(t, err)
	assert.True(t, c)
	assert.NotEqual(t, id.Name(), tj.Name)
	assert.Len(t, testenv.TrainJobs(t.Context(), t, env.Client, ns), 2)
}

func TestNameTakenBySomeoneElse(t *testing.T) {
	ns := env.Namespace(t)
	p := plan(t, ns, "framework: torch\nlabels: {sim-mode: hold}\ntrainer: {func: "+pyFunc+"}")
	id := identity(t, "train")
	foreign := p.TrainJob(id)
	foreign.Labels = map[string]string{"sim-mode": "hold"}
	require.NoError(t, env.Client.Create(t.Context(), foreign))
	_, _, err := trainjob.Submit(t.Context(), env.Client, p.TrainJob(id), id)
	require.Error(t, err)
	assert.True(t, errors.Is(err, trainjob.ErrNameTaken), err)
}

// The owner reference makes the garbage collector (a real kube-controller-manager) remove the
// TrainJob with its owner.
func TestOwnerDeletionRemovesTrainJob(t *testing.T) {
	ns := env.Namespace(t)
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pipeline-run", Namespace: ns}}
	require.NoError(t, env.Client.Create(t.Context(), owner))
	p := plan(t, ns, "framework: torch\nlabels: {sim-mode: hold}\ntrainer: {func: "+pyFunc+"}")
	id := identity(t, "train")
	id.Owner = &metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	_, _, err := trainjob.Submit(t.Context(), env.Client, p.TrainJob(id), id)
	require.NoError(t, err)
	require.NoError(t, env.Client.Delete(t.Context(), owner, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	require.Eventually(t, func() bool {
		err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: id.Name()}, &trainer.TrainJob{})
		return apierrors.IsNotFound(err)
	}, testenv.Timeout, testenv.Interval)
}
