// Package skew_test runs discovery and submission against the CRDs and stock runtimes of two
// Trainer releases, so a change that only works on the newest one is caught.
package skew_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainers"
	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/cli"
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
			t.Run("pod block", func(t *testing.T) { podBlock(t, env, ns, version) })
			t.Run("deadline and command limit", func(t *testing.T) { limits(t, env, ns, version) })
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

const podStep = `framework: torch
trainer: {func: "def train():\n    pass\n", numNodes: 2}
pod:
  nodeSelector: {pool: gpu}
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  serviceAccountName: trainer
  imagePullSecrets: [regcred]
  volumes:
  - {name: data, persistentVolumeClaim: {claimName: datasets}}
  - {name: shared, nfs: {server: nfs.example.com, path: /exports/datasets}}
  - {name: vault, csi: {driver: secrets-store.csi.k8s.io, volumeAttributes: {secretProviderClass: vault}}}
  - {name: scratch, ephemeral: {volumeClaimTemplate: {spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}}}}
  volumeMounts: [{name: data, mountPath: /data}]
  env: {HF_TOKEN: {secretKeyRef: {name: hf, key: token}}}
  envFrom: [{secretRef: {name: s3}, prefix: AWS_}]
`

// podBlock: the installed Trainer is read from its CRD through the apiserver, and the pod block
// reaches the TrainJob the way that release takes it (runtimePatches on v2.3, podTemplateOverrides
// on v2.1), accepted by that release's CRD; --dry-run says which.
func podBlock(t *testing.T, env *testenv.Env, ns, version string) {
	api, err := trainjob.DetectAPI(t.Context(), env.Client)
	require.NoError(t, err)
	mechanism, deadline := trainjob.PodRuntimePatches, true
	if version == "v2.1.0" {
		mechanism, deadline = trainjob.PodTemplateOverrides, false
	}
	assert.Equal(t, mechanism, api.PodMechanism)
	assert.Equal(t, deadline, api.ActiveDeadline)
	if version == "v2.3.0" {
		assert.Equal(t, trainjob.CommandItemV23, api.MaxCommandItem)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "step.yaml")
	require.NoError(t, os.WriteFile(file, []byte(podStep), 0o644))
	var stdout, stderr bytes.Buffer
	code := cli.Main(t.Context(), []string{"run", "--dry-run", "-f", file, "--kubeconfig", env.Kubeconfig, "-n", ns}, nil, &stdout, &stderr)
	require.Equal(t, cli.ExitSucceeded, code, stderr.String())
	assert.Contains(t, stdout.String(), "# Trainer API: CRD trainjobs.trainer.kubeflow.org")
	assert.Contains(t, stderr.String(), "the pod block goes to spec."+mechanism)
	assert.Contains(t, stdout.String(), mechanism+":")

	s, err := step.Parse([]byte(podStep))
	require.NoError(t, err)
	planner := &trainjob.Planner{Trainers: trainers.Builtin(), Runtimes: runtimes.ClusterSource{Reader: env.Client}, Detector: &trainjob.APIDetector{Reader: env.Client}}
	p, err := planner.Plan(t.Context(), s, ns)
	require.NoError(t, err)
	id := trainjob.Identity{Engine: "test", OwnerUID: version, StepKey: "pod-block"}
	obj, err := p.Object(id)
	require.NoError(t, err)
	_, created, err := trainjob.Submit(t.Context(), env.Client, obj, id)
	require.NoError(t, err, "Trainer %s's CRD must accept the pod block", version)
	require.True(t, created)

	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(trainer.GroupVersion.WithKind(trainer.TrainJobKind))
	require.NoError(t, env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: id.Name()}, got))
	var podSpec map[string]any
	if version == "v2.1.0" {
		_, has, _ := unstructured.NestedSlice(got.Object, "spec", "runtimePatches")
		assert.False(t, has)
		ov, _, _ := unstructured.NestedSlice(got.Object, "spec", "podTemplateOverrides")
		require.Len(t, ov, 1, "kept by the v2.1 CRD's schema, not pruned")
		podSpec, _, _ = unstructured.NestedMap(ov[0].(map[string]any), "spec")
	} else {
		rp, _, _ := unstructured.NestedSlice(got.Object, "spec", "runtimePatches")
		require.Len(t, rp, 1, "kept by the v2.3 CRD's schema, not pruned")
		assert.Equal(t, trainjob.PatchManager, rp[0].(map[string]any)["manager"])
		jobs, _, _ := unstructured.NestedSlice(rp[0].(map[string]any), "trainingRuntimeSpec", "template", "spec", "replicatedJobs")
		require.Len(t, jobs, 1)
		podSpec, _, _ = unstructured.NestedMap(jobs[0].(map[string]any), "template", "spec", "template", "spec")
	}
	sel, _, _ := unstructured.NestedStringMap(podSpec, "nodeSelector")
	assert.Equal(t, map[string]string{"pool": "gpu"}, sel)
	sa, _, _ := unstructured.NestedString(podSpec, "serviceAccountName")
	assert.Equal(t, "trainer", sa)
	vols, _, _ := unstructured.NestedSlice(podSpec, "volumes")
	require.Len(t, vols, 5, "the PVC, the NFS, CSI and ephemeral volumes, and envFrom's Secret")
	claim, _, _ := unstructured.NestedString(vols[0].(map[string]any), "persistentVolumeClaim", "claimName")
	assert.Equal(t, "datasets", claim)
	// Every pod volume source reaches the TrainJob: the CRD's schema keeps it (not pruned).
	server, _, _ := unstructured.NestedString(vols[1].(map[string]any), "nfs", "server")
	assert.Equal(t, "nfs.example.com", server)
	driver, _, _ := unstructured.NestedString(vols[2].(map[string]any), "csi", "driver")
	assert.Equal(t, "secrets-store.csi.k8s.io", driver)
	storage, _, _ := unstructured.NestedString(vols[3].(map[string]any), "ephemeral", "volumeClaimTemplate", "spec", "resources", "requests", "storage")
	assert.Equal(t, "10Gi", storage)
	ctrs, _, _ := unstructured.NestedSlice(podSpec, "containers")
	require.Len(t, ctrs, 1)
	mounts, _, _ := unstructured.NestedSlice(ctrs[0].(map[string]any), "volumeMounts")
	require.Len(t, mounts, 2)
	assert.Equal(t, "/data", mounts[0].(map[string]any)["mountPath"])
	envs, _, _ := unstructured.NestedSlice(got.Object, "spec", "trainer", "env")
	require.NotEmpty(t, envs)
	secret, _, _ := unstructured.NestedString(envs[len(envs)-1].(map[string]any), "valueFrom", "secretKeyRef", "name")
	assert.Equal(t, "hf", secret)
}

// limits: on v2.3 the step's timeout also becomes spec.activeDeadlineSeconds and a function of
// 100 KiB goes uncompressed (the CRD's 1 MiB limit, under Linux's 128 KiB per argument), both
// accepted by the real CRD; on v2.1 neither (no such field; 64 KiB, so compressed).
func limits(t *testing.T, env *testenv.Env, ns, version string) {
	src := "def train():\n    pass\n" + strings.Repeat("# padding padding padding padding padding padding padding\n", 1750)
	b, err := json.Marshal(src)
	require.NoError(t, err)
	s, err := step.Parse([]byte("framework: torch\ntimeout: 90m\ntrainer: {func: " + string(b) + "}"))
	require.NoError(t, err)
	planner := &trainjob.Planner{Trainers: trainers.Builtin(), Runtimes: runtimes.ClusterSource{Reader: env.Client}, Detector: &trainjob.APIDetector{Reader: env.Client}}
	p, err := planner.Plan(t.Context(), s, ns)
	require.NoError(t, err)
	id := trainjob.Identity{Engine: "test", OwnerUID: version, StepKey: "limits"}
	obj, err := p.Object(id)
	require.NoError(t, err)
	_, _, err = trainjob.Submit(t.Context(), env.Client, obj, id)
	require.NoError(t, err, "Trainer %s's CRD must accept it", version)
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(trainer.GroupVersion.WithKind(trainer.TrainJobKind))
	require.NoError(t, env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: id.Name()}, got))
	deadline, hasDeadline, _ := unstructured.NestedInt64(got.Object, "spec", "activeDeadlineSeconds")
	cmd, _, _ := unstructured.NestedStringSlice(got.Object, "spec", "trainer", "command")
	require.Len(t, cmd, 3)
	if version == "v2.1.0" {
		assert.False(t, hasDeadline)
		assert.Contains(t, cmd[2], "zlib.decompress", "64 KiB: compressed")
		return
	}
	assert.Equal(t, int64(90*60), deadline)
	assert.Greater(t, len(cmd[2]), trainjob.CommandItemV22, "over v2.2's limit, accepted by v2.3's CRD")
	assert.NotContains(t, cmd[2], "zlib.decompress")
}
