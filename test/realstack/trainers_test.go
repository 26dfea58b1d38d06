package realstack_test

import (
	"slices"
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/test/internal/realstack"
)

// Labels JobSet puts on the pods it makes.
const (
	labelJobSet         = "jobset.sigs.k8s.io/jobset-name"
	labelReplicatedJob  = "jobset.sigs.k8s.io/replicatedjob-name"
	torchtuneRuntime    = "torchtune-llama3.2-1b"
	pipelineStepKey     = "train-dag-x7k2p.train"
	pipelineOwnerUID    = "5f0c6c0e-6a7e-4c1b-9a59-3d1e2f4a7b10"
	initializerStepYAML = `
framework: torchtune
runtime: {name: torchtune-llama3.2-1b}
initializer:
  dataset: {storageUri: "hf://tatsu-lab/alpaca"}
  model: {storageUri: "hf://meta-llama/Llama-3.2-1B-Instruct", env: {HF_TOKEN: none}}
trainer: {epochs: 1}
`
)

// funcBody is a Python function every function trainer accepts; kwok never runs it.
const funcBody = `"def train():\n    print('hello')\n"`

// stepPods lists the pods of the namespace, checking that each one was made by a Job of the
// TrainJob's JobSet, carries trainstep's pod labels (through spec.runtimePatches: the faces' pod
// caches select by them), was bound to a kwok Node by the scheduler and Succeeded, and returns
// them by replicated job.
//
// On a Trainer with no pod-template mechanism (v2.0) the pods cannot carry trainstep's labels,
// and carry none: the faces then watch every JobSet pod of the namespace.
//
// The pods of the replicated jobs in unfinished may not have run: a launcher that does not wait
// for its nodes can end first, and JobSet then ends the nodes' Job.
func stepPods(t *testing.T, ns, trainJob string, unfinished ...string) map[string][]corev1.Pod {
	t.Helper()
	labelled := installedAPI(t).PodMechanism != ""
	if !labelled {
		realstack.Lacks(t, "Trainer %s has no pod-template mechanism: its pods carry no trainstep labels, so the faces watch every JobSet pod of the namespace", trainerRelease(t))
	}
	pods := &corev1.PodList{}
	require.NoError(t, stack.Client.List(t.Context(), pods, client.InNamespace(ns)))
	byJob := map[string][]corev1.Pod{}
	for _, p := range pods.Items {
		assert.Equal(t, trainJob, p.Labels[labelJobSet], "pod %s", p.Name)
		if labelled {
			assert.Equal(t, trainjob.ManagedByValue, p.Labels[trainjob.LabelManagedBy], "pod %s: trainstep's pod labels", p.Name)
			assert.NotEmpty(t, p.Labels[trainjob.LabelEngine], "pod %s: trainstep's pod labels", p.Name)
			assert.NotEmpty(t, p.Labels[trainjob.LabelOwnerUID], "pod %s: trainstep's pod labels", p.Name)
		} else {
			assert.Empty(t, p.Labels[trainjob.LabelManagedBy], "pod %s", p.Name)
		}
		byJob[p.Labels[labelReplicatedJob]] = append(byJob[p.Labels[labelReplicatedJob]], p)
		if slices.Contains(unfinished, p.Labels[labelReplicatedJob]) {
			continue
		}
		assert.Contains(t, stack.Nodes, p.Spec.NodeName, "pod %s was not bound to a kwok Node", p.Name)
		assert.Equal(t, corev1.PodSucceeded, p.Status.Phase, "pod %s", p.Name)
		owned := false
		for _, o := range p.OwnerReferences {
			owned = owned || o.Kind == "Job" && o.APIVersion == batchv1.SchemeGroupVersion.String()
		}
		assert.True(t, owned, "pod %s is not owned by a Job: %v", p.Name, p.OwnerReferences)
		assert.True(t, podScheduled(&p), "pod %s has no PodScheduled=True", p.Name)
	}
	return byJob
}

func podScheduled(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestEveryTrainerKindSucceedsOnTheRealStack runs one step of every builtin trainer kind through
// the real executor binary, the real Trainer and JobSet webhooks and controllers, the Job
// controller and kube-scheduler, to Succeeded, and checks the pods each replicated job really
// had. The torchtune steps run with a pipeline's step key: the name-length defect made that one
// stay Pending (JobSet's webhook refused its initializer pod names).
func TestEveryTrainerKindSucceedsOnTheRealStack(t *testing.T) {
	cases := []struct {
		name, step, runtime string
		args                []string
		// pods per replicated job
		pods map[string]int
		// check, when set, looks further at what the Trainer made.
		check func(t *testing.T, ns, name string, byJob map[string][]corev1.Pod)
	}{
		{name: "TorchTrainer", runtime: "torch-distributed", pods: map[string]int{"node": 2},
			step: "framework: torch\ntrainer: {numNodes: 2, func: " + funcBody + "}"},
		{name: "MPITrainer", runtime: "deepspeed-distributed", pods: map[string]int{"launcher": 1, "node": 1},
			step: "framework: mpi\ntrainer: {numNodes: 2, func: " + funcBody + "}"},
		{name: "MPITrainerOnMLX", runtime: "mlx-distributed", pods: map[string]int{"launcher": 1, "node": 2},
			step: "runtime: {name: mlx-distributed}\ntrainer: {kind: MPITrainer, numNodes: 3, func: " + funcBody + "}"},
		{name: "DeepSpeedTrainer", runtime: "deepspeed-distributed", pods: map[string]int{"launcher": 1, "node": 1},
			step: "framework: deepspeed\ntrainer: {numNodes: 2, func: " + funcBody + "}"},
		{name: "JAXTrainer", runtime: "jax-distributed", pods: map[string]int{"node": 2},
			step: "framework: jax\ntrainer: {numNodes: 2, func: " + funcBody + "}"},
		{name: "XGBoostTrainer", runtime: "xgboost-distributed", pods: map[string]int{"node": 2},
			step: "framework: xgboost\ntrainer: {numNodes: 2, func: " + funcBody + "}"},
		{name: "CustomTrainer", runtime: "torch-distributed", pods: map[string]int{"node": 1},
			step: "trainer: {kind: CustomTrainer, func: " + funcBody + "}"},
		{name: "CustomTrainerContainer", runtime: "torch-distributed", pods: map[string]int{"node": 2},
			step: "trainer: {kind: CustomTrainerContainer, image: busybox:1.37, command: [sh, -c], args: ['echo hi'], numNodes: 2}"},
		{name: "TorchTuneTrainerWithAPipelineStepKey", runtime: torchtuneRuntime,
			args:  []string{"--step-key", pipelineStepKey, "--owner-uid", pipelineOwnerUID},
			pods:  map[string]int{"dataset-initializer": 1, "model-initializer": 1, "node": 1},
			step:  "framework: torchtune\nruntime: {name: " + torchtuneRuntime + "}\ntrainer: {epochs: 1, batchSize: 2}",
			check: assertTorchTuneRewrite},
		{name: "InitializerOverridden", runtime: torchtuneRuntime,
			args: []string{"--step-key", pipelineStepKey + "-init", "--owner-uid", pipelineOwnerUID},
			pods: map[string]int{"dataset-initializer": 1, "model-initializer": 1, "node": 1},
			step: initializerStepYAML, check: assertInitializerEnv},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ns := stack.Namespace(t)
			if hasRuntime(c.runtime) {
				makeRuntimeClaims(t, ns, c.runtime)
			}
			r := executor(t, ns, c.step+"\ntimeout: 3m\n", c.args...)
			if !hasRuntime(c.runtime) {
				// The release ships no such runtime (v2.0 and v2.1: no JAX, no XGBoost).
				realstack.Lacks(t, "Trainer %s ships no %s runtime: trainstep refuses the %s step by name at plan time (exit 2, %q)", trainerRelease(t), c.runtime, c.name, "runtime: Required value: no runtime for …")
				refusedAtPlan(t, ns, r, "runtime: Required value: no runtime for "+c.name)
				return
			}
			require.Equal(t, cli.ExitSucceeded, r.Code, "stderr:\n%s\nstdout:\n%s", r.Stderr, r.Stdout)
			assert.Equal(t, "Succeeded", r.Outputs["phase"])
			assert.Equal(t, c.runtime, r.Outputs["runtime"])
			name := r.Outputs["trainjob-name"]
			require.NotEmpty(t, name)
			if strings.HasPrefix(c.name, "TorchTune") {
				assert.Contains(t, name, "x7k2p-train", "the TrainJob's name should carry the step key")
			}
			waits := c.pods["launcher"] == 0 || launcherWaitsForNodes(t, c.runtime)
			var unfinished []string
			if !waits {
				unfinished = []string{"node"}
			}
			byJob := stepPods(t, ns, name, unfinished...)
			got := map[string]int{}
			for k, v := range byJob {
				got[k] = len(v)
			}
			if !waits {
				// kwok ends every pod after the same delay; a launcher that does not wait for
				// its nodes may end first, and JobSet then ends the nodes' Job.
				realstack.Lacks(t, "Trainer %s's %s runtime starts the launcher without waiting for the nodes (dependsOn, v2.3+): the nodes' pods may be gone when the launcher ends first", trainerRelease(t), c.runtime)
				assert.Equal(t, c.pods["launcher"], got["launcher"], "launcher pods")
				assert.LessOrEqual(t, got["node"], c.pods["node"], "node pods")
			} else {
				assert.Equal(t, c.pods, got, "pods per replicated job")
			}
			if c.check != nil {
				c.check(t, ns, name, byJob)
			}
		})
	}
}

// makeRuntimeClaims makes in ns, bound, the PersistentVolumeClaims the runtime's pods mount by
// name, as the release's users must beforehand (the torchtune runtimes before v2.2; v2.2+ makes
// one per TrainJob from volumeClaimPolicies).
func makeRuntimeClaims(t *testing.T, ns, runtime string) {
	t.Helper()
	for _, claim := range runtimeClaims(t, runtime) {
		realstack.Lacks(t, "Trainer %s's %s runtime mounts the PersistentVolumeClaim %q, which the user makes in the step's namespace beforehand (v2.2+ makes one per TrainJob from volumeClaimPolicies): the test makes it", trainerRelease(t), runtime, claim)
		boundClaim(t, ns, claim)
	}
}

// runtimeClaims are the PersistentVolumeClaims the runtime's pods mount by name.
func runtimeClaims(t *testing.T, runtime string) []string {
	t.Helper()
	rt := &trainer.ClusterTrainingRuntime{}
	require.NoError(t, stack.Client.Get(t.Context(), client.ObjectKey{Name: runtime}, rt))
	var claims []string
	for _, j := range rt.Spec.Template.Spec.ReplicatedJobs {
		for _, v := range j.Template.Spec.Template.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && !slices.Contains(claims, v.PersistentVolumeClaim.ClaimName) {
				claims = append(claims, v.PersistentVolumeClaim.ClaimName)
			}
		}
	}
	return claims
}

// launcherWaitsForNodes says whether the runtime starts its launcher only once its nodes are
// ready (JobSet dependsOn, in the stock runtimes from v2.3).
func launcherWaitsForNodes(t *testing.T, runtime string) bool {
	t.Helper()
	rt := &trainer.ClusterTrainingRuntime{}
	require.NoError(t, stack.Client.Get(t.Context(), client.ObjectKey{Name: runtime}, rt))
	for _, j := range rt.Spec.Template.Spec.ReplicatedJobs {
		if j.Name == "launcher" {
			return len(j.DependsOn) > 0
		}
	}
	return false
}

// assertInitializerEnv: the step's initializer block replaces the runtime's STORAGE_URI on the
// initializer pods the Trainer made, and adds its env.
func assertInitializerEnv(t *testing.T, _, _ string, byJob map[string][]corev1.Pod) {
	env := func(p corev1.Pod) map[string]string {
		m := map[string]string{}
		for _, e := range p.Spec.Containers[0].Env {
			m[e.Name] = e.Value
		}
		return m
	}
	require.Len(t, byJob["dataset-initializer"], 1)
	require.Len(t, byJob["model-initializer"], 1)
	assert.Equal(t, "hf://tatsu-lab/alpaca", env(byJob["dataset-initializer"][0])["STORAGE_URI"])
	model := env(byJob["model-initializer"][0])
	assert.Equal(t, "hf://meta-llama/Llama-3.2-1B-Instruct", model["STORAGE_URI"])
	assert.Equal(t, "none", model["HF_TOKEN"])
}

// TestExtendedResourceNamesKeepTheirCase: a step asking for huawei.com/Ascend910 keeps the
// capitals (the resource is case-sensitive), so kube-scheduler finds the one Node advertising it.
func TestExtendedResourceNamesKeepTheirCase(t *testing.T) {
	t.Parallel()
	ns := stack.Namespace(t)
	r := executor(t, ns, `
framework: torch
trainer:
  numNodes: 1
  resourcesPerNode: {huawei.com/Ascend910: 1, cpu: 1}
  func: `+funcBody+`
timeout: 3m
`)
	require.Equal(t, cli.ExitSucceeded, r.Code, "stderr:\n%s\nstdout:\n%s", r.Stderr, r.Stdout)
	byJob := stepPods(t, ns, r.Outputs["trainjob-name"])
	require.Len(t, byJob["node"], 1)
	p := byJob["node"][0]
	assert.Equal(t, realstack.AscendNode, p.Spec.NodeName)
	q := p.Spec.Containers[0].Resources.Limits[realstack.AscendResource]
	assert.Equal(t, int64(1), q.Value(), "limits %v", p.Spec.Containers[0].Resources.Limits)
	for name := range p.Spec.Containers[0].Resources.Limits {
		assert.NotEqual(t, strings.ToLower(realstack.AscendResource), string(name), "the resource name lost its case")
	}
}
