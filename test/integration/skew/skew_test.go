// Package skew_test runs discovery and submission against the CRDs and stock runtimes of two
// Trainer releases, so a change that only works on the newest one is caught.
package skew_test

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainers"
	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

const fn = `"def train(lr=0.1):\n    print(lr)\n"`

type expectation struct {
	step    string
	runtime string // the runtime discovery must pick, or
	err     string // the error it must give
}

// What each release ships decides what discovery finds: v2.1.0 has no jax/xgboost runtimes.
var versions = map[string]map[string]expectation{
	"v2.1.0": {
		"torch":     {step: "framework: torch\ntrainer: {func: " + fn + ", numNodes: 2, numProcPerNode: 2}", runtime: "torch-distributed"},
		"deepspeed": {step: "framework: deepspeed\ntrainer: {func: " + fn + "}", runtime: "deepspeed-distributed"},
		"mpi":       {step: "framework: mpi\ntrainer: {func: " + fn + ", numProcPerNode: 2}", runtime: "deepspeed-distributed"},
		"torchtune": {step: "framework: torchtune\nruntime: {name: torchtune-llama3.2-1b}\ntrainer: {epochs: 1}", runtime: "torchtune-llama3.2-1b"},
		"container": {step: "trainer: {kind: CustomTrainerContainer, image: ghcr.io/me/t:1, command: [python, t.py]}", runtime: "torch-distributed"},
		"jax":       {step: "framework: jax\ntrainer: {func: " + fn + "}", err: `no runtime for JAXTrainer, which needs framework "jax"`},
		"xgboost":   {step: "framework: xgboost\ntrainer: {func: " + fn + "}", err: `no runtime for XGBoostTrainer`},
	},
	"v2.3.0": {
		"torch":     {step: "framework: torch\ntrainer: {func: " + fn + ", numNodes: 2, numProcPerNode: 2}", runtime: "torch-distributed"},
		"deepspeed": {step: "framework: deepspeed\ntrainer: {func: " + fn + "}", runtime: "deepspeed-distributed"},
		"mpi":       {step: "framework: mpi\ntrainer: {func: " + fn + ", numProcPerNode: 2}", runtime: "deepspeed-distributed"},
		"torchtune": {step: "framework: torchtune\nruntime: {name: torchtune-llama3.2-1b}\ntrainer: {epochs: 1}", runtime: "torchtune-llama3.2-1b"},
		"container": {step: "trainer: {kind: CustomTrainerContainer, image: ghcr.io/me/t:1, command: [python, t.py]}", runtime: "torch-distributed"},
		"jax":       {step: "framework: jax\ntrainer: {func: " + fn + "}", runtime: "jax-distributed"},
		"xgboost":   {step: "framework: xgboost\ntrainer: {func: " + fn + "}", runtime: "xgboost-distributed"},
	},
}

func TestDiscoveryAndSubmitAcrossTrainerReleases(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	for _, version := range []string{"v2.1.0", "v2.3.0"} {
		t.Run(version, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 3*testenv.Timeout)
			env, err := testenv.Start(ctx, testenv.Options{TrainerVersion: version})
			cancel()
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, env.Stop()) })
			ns := env.Namespace(t)
			planner := &trainjob.Planner{Trainers: trainers.Builtin(), Runtimes: runtimes.ClusterSource{Reader: env.Client}}
			for name, want := range versions[version] {
				t.Run(name, func(t *testing.T) {
					s, err := step.Parse([]byte(want.step))
					require.NoError(t, err)
					p, err := planner.Plan(t.Context(), s, ns)
					if want.err != "" {
						require.Error(t, err)
						assert.True(t, step.IsInvalid(err))
						assert.Contains(t, err.Error(), want.err)
						return
					}
					require.NoError(t, err)
					assert.Equal(t, want.runtime, p.Runtime.Name)
					id := trainjob.Identity{Engine: "test", OwnerUID: version, StepKey: name}
					_, created, err := trainjob.Submit(t.Context(), env.Client, p.TrainJob(id), id)
					require.NoError(t, err, "Trainer %s's CRD must accept the TrainJob", version)
					require.True(t, created)
					got := &trainer.TrainJob{}
					require.NoError(t, env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: id.Name()}, got))
					assert.Equal(t, want.runtime, got.Spec.RuntimeRef.Name)
					assert.Equal(t, p.Parts.Command, got.Spec.Trainer.Command)
					assert.Equal(t, p.Parts.NumProcPerNode, got.Spec.Trainer.NumProcPerNode, "numProcPerNode's integer form works before and after v2.2")
				})
			}
		})
	}
}
