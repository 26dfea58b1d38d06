package realstack_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainers"
	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/test/internal/realstack"
)

// plan runs trainstep's own path (parse, validate, trainer, runtime discovery on the real
// stack's runtimes, the pre-checks) for a step, as `executor run` does.
func plan(t *testing.T, ns, yaml string) (*trainjob.Plan, error) {
	t.Helper()
	s, err := step.Parse([]byte(yaml))
	require.NoError(t, err)
	p := &trainjob.Planner{Trainers: trainers.Builtin(), Runtimes: runtimes.ClusterSource{Reader: stack.Client}}
	return p.Plan(t.Context(), s, ns)
}

// build is the TrainJob trainstep makes of a valid step.
func build(t *testing.T, ns, yaml, key string) *trainer.TrainJob {
	t.Helper()
	p, err := plan(t, ns, yaml)
	require.NoError(t, err, "the base step must be valid")
	return p.TrainJob(trainjob.Identity{Engine: "realstack", OwnerUID: "differential", StepKey: key})
}

// The real stack's verdicts on a TrainJob.
const (
	webhookRejects = "webhook rejects"
	schemaRejects  = "CRD schema rejects"
	webhookAccepts = "accepted"
)

// TestPreChecksAgreeWithTheTrainerWebhook: for every input trainstep refuses because the
// Trainer's webhook would, the TrainJob trainstep would otherwise have built (a valid step's,
// with the offending field put back) is created on the real stack, bypassing the pre-check.
// The real webhook's verdict is asserted: where it accepts, the pre-check guards something else
// (the case says what).
func TestPreChecksAgreeWithTheTrainerWebhook(t *testing.T) {
	torch := "framework: torch\ntrainer: {func: " + funcBody + "}"
	tune := "framework: torchtune\nruntime: {name: " + torchtuneRuntime + "}\ntrainer: {epochs: 1}"
	env := func(name, value string) func(*trainer.TrainJob) {
		return func(tj *trainer.TrainJob) {
			tj.Spec.Trainer.Env = append(tj.Spec.Trainer.Env, corev1.EnvVar{Name: name, Value: value})
		}
	}
	cases := []struct {
		name string
		// bad is the step trainstep refuses; base is the valid step whose TrainJob tweak turns
		// into what bad would have made.
		bad, base string
		tweak     func(*trainer.TrainJob)
		// verdict is the real webhook's; message is part of its answer when it rejects.
		verdict, message string
	}{
		{name: "PET env on torch", bad: "framework: torch\ntrainer: {func: " + funcBody + ", env: {PET_NNODES: '2'}}",
			base: torch, tweak: env("PET_NNODES", "2"), verdict: webhookRejects, message: "must not have reserved envs"},
		{name: "PET env in runtimeConfig", bad: torch + "\nruntimeConfig: {env: {PET_MASTER_PORT: '1'}}",
			base: torch, tweak: env("PET_MASTER_PORT", "1"), verdict: webhookRejects, message: "must not have reserved envs"},
		// PET_MAX_RESTARTS is not reserved; the env list is a map keyed by name, so the apiserver
		// refuses the second value before any webhook.
		{name: "maxRestarts and PET_MAX_RESTARTS", bad: "framework: torch\ntrainer: {func: " + funcBody + ", maxRestarts: 2, env: {PET_MAX_RESTARTS: '1'}}",
			base: "framework: torch\ntrainer: {func: " + funcBody + ", maxRestarts: 2}", tweak: env("PET_MAX_RESTARTS", "1"), verdict: schemaRejects, message: "Duplicate value"},
		// The JAX plugin validates nothing: it overwrites the user's value (UpsertEnvVars).
		{name: "JAX env on jax", bad: "framework: jax\ntrainer: {func: " + funcBody + ", env: {JAX_PROCESS_ID: '0'}}",
			base: "framework: jax\ntrainer: {func: " + funcBody + "}", tweak: env("JAX_PROCESS_ID", "0"), verdict: webhookAccepts},
		{name: "DMLC env on xgboost", bad: "framework: xgboost\ntrainer: {func: " + funcBody + ", env: {DMLC_TASK_ID: '0'}}",
			base: "framework: xgboost\ntrainer: {func: " + funcBody + "}", tweak: env("DMLC_TASK_ID", "0"), verdict: webhookRejects, message: "is reserved for the XGBoost runtime"},
		// trainstep let this through until this test (the webhook's answer made exit 4, not 2).
		{name: "OMPI env on mpi", bad: "framework: mpi\ntrainer: {func: " + funcBody + ", env: {OMPI_MCA_orte_default_hostfile: /tmp/h}}",
			base: "framework: mpi\ntrainer: {func: " + funcBody + "}", tweak: env("OMPI_MCA_orte_default_hostfile", "/tmp/h"),
			verdict: webhookRejects, message: "must not have reserved envs"},
		// Neither the CRD nor a plugin bounds numProcPerNode: torchrun would fail at start.
		{name: "numProcPerNode 0 on torch", bad: "framework: torch\ntrainer: {func: " + funcBody + ", numProcPerNode: 0}",
			base: torch, tweak: func(tj *trainer.TrainJob) { tj.Spec.Trainer.NumProcPerNode = ptr.To[int32](0) }, verdict: webhookAccepts},
		{name: "numProcPerNode 0 on mpi", bad: "framework: mpi\ntrainer: {func: " + funcBody + ", numProcPerNode: 0}",
			base: "framework: mpi\ntrainer: {func: " + funcBody + "}", tweak: func(tj *trainer.TrainJob) { tj.Spec.Trainer.NumProcPerNode = ptr.To[int32](0) }, verdict: webhookAccepts},
		// Nothing bounds numNodes either: the JobSet would have no trainer pod.
		{name: "numNodes 0", bad: "framework: torch\ntrainer: {func: " + funcBody + ", numNodes: 0}",
			base: torch, tweak: func(tj *trainer.TrainJob) { tj.Spec.Trainer.NumNodes = ptr.To[int32](0) }, verdict: webhookAccepts},
		{name: "torchtune output_dir", bad: "framework: torchtune\nruntime: {name: " + torchtuneRuntime + "}\ntrainer: {config: {output_dir: /tmp/x}}",
			base: tune, tweak: func(tj *trainer.TrainJob) { tj.Spec.Trainer.Args = append(tj.Spec.Trainer.Args, "output_dir=/tmp/x") },
			verdict: webhookRejects, message: "output_dir"},
		{name: "torchtune 1B on 2 nodes", bad: "framework: torchtune\nruntime: {name: " + torchtuneRuntime + "}\ntrainer: {numNodes: 2}",
			base: tune, tweak: func(tj *trainer.TrainJob) { tj.Spec.Trainer.NumNodes = ptr.To[int32](2) },
			verdict: webhookRejects, message: "numNodes"},
		{name: "torchtune LoRA on 2 nodes", bad: "framework: torchtune\nruntime: {name: " + torchtuneRuntime + "}\ntrainer: {numNodes: 2, config: {model.lora_attn_modules: [q_proj]}}",
			base: tune, tweak: func(tj *trainer.TrainJob) {
				tj.Spec.Trainer.NumNodes = ptr.To[int32](2)
				tj.Spec.Trainer.Args = append(tj.Spec.Trainer.Args, "model.lora_attn_modules=[q_proj]")
			},
			verdict: webhookRejects, message: "LoRA fine-tuning is not supported for multi-node training"},
		{name: "runtime that does not exist", bad: "framework: torch\nruntime: {name: no-such-runtime}\ntrainer: {func: " + funcBody + "}",
			base: torch, tweak: func(tj *trainer.TrainJob) { tj.Spec.RuntimeRef.Name = "no-such-runtime" },
			verdict: webhookRejects, message: "must be created before the TrainJob is created"},
	}
	ns := stack.Namespace(t)
	var table []string
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := plan(t, ns, c.bad)
			var inv *step.InvalidError
			require.True(t, errors.As(err, &inv), "trainstep should refuse the step: %v", err)
			if _, err := plan(t, ns, c.base); err != nil && strings.Contains(err.Error(), "runtime: Required value: no runtime for") {
				// No runtime of the framework on this release (v2.0, v2.1: JAX, XGBoost).
				realstack.Lacks(t, "Trainer %s ships no runtime for %q: no TrainJob to put to its webhook; trainstep refuses the step by name", trainerRelease(t), c.name)
				return
			}
			tj := build(t, ns, c.base, fmt.Sprintf("differential-%d", i))
			c.tweak(tj)
			err = stack.Client.Create(t.Context(), tj)
			verdict := webhookAccepts
			switch {
			case err != nil && strings.Contains(err.Error(), `admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request`):
				verdict = webhookRejects
			case err != nil:
				verdict = schemaRejects
			}
			table = append(table, fmt.Sprintf("%-34s trainstep refuses, real stack: %s", c.name, verdict))
			if err == nil {
				_ = stack.Client.Delete(t.Context(), tj)
			}
			if !pinnedRelease(t) {
				// The verdicts above are the pinned release's. Another release's webhook may be
				// more lenient, or refuse in other words; trainstep refuses at plan time anyway.
				if verdict != c.verdict || (err != nil && !strings.Contains(err.Error(), c.message)) {
					realstack.Lacks(t, "Trainer %s's webhook answers %q with %s (v2.3: %s): trainstep refuses it by name at plan time either way", trainerRelease(t), c.name, verdict, c.verdict)
				}
				return
			}
			require.Equal(t, c.verdict, verdict, "the real stack's verdict (error: %v)", err)
			if err != nil {
				assert.Contains(t, err.Error(), c.message)
			}
		})
	}
	t.Logf("pre-check vs the real webhook:\n%s", strings.Join(table, "\n"))
}

// assertTorchTuneRewrite: the Trainer's torch plugin saw command [tune, run] and rewrote the
// node's command (rendezvous on node 0, recipe and config from the node count and GPUs, the
// runtime's immutable paths), keeping trainstep's overrides as the args; the local backend's
// TuneCommand makes the same.
func assertTorchTuneRewrite(t *testing.T, ns, name string, byJob map[string][]corev1.Pod) {
	require.Len(t, byJob["node"], 1)
	c := byJob["node"][0].Spec.Containers[0]
	// constants.ContainerTrainerPort: the rendezvous port is 29500 in v2.3.
	assert.Equal(t, []string{
		"tune", "run", fmt.Sprintf("--rdzv_endpoint=%s-node-0-0.%s:29500", name, name),
		"full_finetune_distributed", "--config", "llama3_2/1B_full",
		"output_dir=/workspace/output", "tokenizer.path=/workspace/model/original/tokenizer.model", "checkpointer.checkpoint_dir=/workspace/model",
	}, c.Command)
	assert.Equal(t, []string{
		"dataset=torchtune.datasets.instruct_dataset", "dataset.source=parquet", "dataset.data_dir=/workspace/dataset/data",
		"batch_size=2", "epochs=1",
	}, c.Args)

	p, err := plan(t, ns, "framework: torchtune\nruntime: {name: "+torchtuneRuntime+"}\ntrainer: {epochs: 1, batchSize: 2}")
	require.NoError(t, err)
	local := trainers.TuneCommand(p.Runtime.Name, p.Runtime.Command, 1, nil, 2, fmt.Sprintf("%s-node-0-0.%s:29500", name, name), p.Parts.Args)
	assert.Equal(t, append(append([]string{}, c.Command...), c.Args...), local, "the local backend's command differs from the Trainer's")
}

// TestTorchTuneOnTwoNodesIsRefusedBeforeCreating: the 1B torchtune step on 2 nodes, which the
// Trainer's webhook refuses (TestPreChecksAgreeWithTheTrainerWebhook), exits 2 and creates
// nothing.
func TestTorchTuneOnTwoNodesIsRefusedBeforeCreating(t *testing.T) {
	t.Parallel()
	ns := stack.Namespace(t)
	r := executor(t, ns, "framework: torchtune\nruntime: {name: "+torchtuneRuntime+"}\ntrainer: {numNodes: 2, epochs: 1}\n",
		"--step-key", pipelineStepKey, "--owner-uid", pipelineOwnerUID)
	assert.Equal(t, cli.ExitInvalid, r.Code, "stderr:\n%s", r.Stderr)
	assert.Contains(t, r.Stderr, "trainer.numNodes")
	tjs := &trainer.TrainJobList{}
	require.NoError(t, stack.Client.List(t.Context(), tjs, client.InNamespace(ns)))
	assert.Empty(t, tjs.Items)
}
