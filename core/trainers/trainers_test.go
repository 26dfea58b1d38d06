package trainers

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/step"
)

var (
	torchRT     = runtimes.Runtime{Name: "torch-distributed", Kind: runtimes.ClusterKind, Framework: "torch", Policy: runtimes.PolicyTorch, Type: runtimes.CustomTrainer, NumNodes: 1}
	deepspeedRT = runtimes.Runtime{Name: "deepspeed-distributed", Kind: runtimes.ClusterKind, Framework: "deepspeed", Policy: runtimes.PolicyMPI, Type: runtimes.CustomTrainer, NumNodes: 1}
	jaxRT       = runtimes.Runtime{Name: "jax-distributed", Kind: runtimes.ClusterKind, Framework: "jax", Policy: runtimes.PolicyJAX, Type: runtimes.CustomTrainer, NumNodes: 1}
	xgbRT       = runtimes.Runtime{Name: "xgboost-distributed", Kind: runtimes.ClusterKind, Framework: "xgboost", Policy: runtimes.PolicyXGBoost, Type: runtimes.CustomTrainer, NumNodes: 1}
	tuneRT      = runtimes.Runtime{Name: "torchtune-llama3.2-1b", Kind: runtimes.ClusterKind, Framework: "torchtune", Policy: runtimes.PolicyTorch, Type: runtimes.BuiltinTrainer, NumNodes: 1,
		Command: []string{"tune", "run", "--rdzv_endpoint=localhost:29500", "full_finetune_distributed", "--config", "llama3_2/1B_full",
			"dataset=torchtune.datasets.instruct_dataset", "output_dir=/workspace/output", "tokenizer.path=/workspace/model/original/tokenizer.model"}}
)

func resolve(t *testing.T, y string) Trainer {
	t.Helper()
	s, err := step.Parse([]byte(y))
	require.NoError(t, err)
	tr, errs := Builtin().Resolve(s)
	require.Empty(t, errs, errs.ToAggregate())
	return tr
}

func build(t *testing.T, y string, rt runtimes.Runtime) (Trainer, Parts) {
	t.Helper()
	s, err := step.Parse([]byte(y))
	require.NoError(t, err)
	tr, errs := Builtin().Resolve(s)
	require.Empty(t, errs, errs.ToAggregate())
	require.Nil(t, tr.ValidateRuntime(&rt))
	p, errs := tr.Build(&rt, s.RuntimeConfig)
	require.Empty(t, errs, errs.ToAggregate())
	return tr, p
}

func env(p Parts) map[string]string {
	out := map[string]string{}
	for _, e := range p.Env {
		out[e.Name] = e.Value
	}
	return out
}

func TestTorchTrainerMapping(t *testing.T) {
	tr, p := build(t, `
framework: torch
trainer:
  func: |
    def train(lr):
        print(lr)
  funcArgs: {lr: 0.1}
  numNodes: 4
  numProcPerNode: 2
  maxRestarts: 3
  monitorInterval: 5
  image: ghcr.io/me/train:1
  resourcesPerNode: {cpu: 3, memory: 16Gi, gpu: 1}
  env: {NCCL_DEBUG: INFO}
`, torchRT)
	assert.Equal(t, "TorchTrainer", tr.Kind())
	assert.Equal(t, []string{"torch"}, tr.Frameworks())
	assert.Equal(t, int32(4), *p.NumNodes)
	assert.Equal(t, int32(2), *p.NumProcPerNode)
	assert.Equal(t, "ghcr.io/me/train:1", p.Image)
	assert.Equal(t, map[string]string{"NCCL_DEBUG": "INFO", "PET_MAX_RESTARTS": "3", "PET_MONITOR_INTERVAL": "5"}, env(p))
	assert.Empty(t, p.Args, "framework args must not go to trainer.args next to bash -c")
	require.Len(t, p.Command, 3)
	assert.Equal(t, []string{"bash", "-c"}, p.Command[:2])
	assert.Contains(t, p.Command[2], `exec torchrun "trainstep_train.py"`)
	assert.Contains(t, p.Command[2], `train(**{"lr": 0.1})`)
	want := corev1.ResourceList{"cpu": resource.MustParse("3"), "memory": resource.MustParse("16Gi"), "nvidia.com/gpu": resource.MustParse("1")}
	assert.Equal(t, want, p.Resources.Requests)
	assert.Equal(t, want, p.Resources.Limits, "requests = limits, as the SDK does")
}

func TestTrainerMappings(t *testing.T) {
	cases := map[string]struct {
		yaml       string
		rt         runtimes.Runtime
		kind       string
		frameworks []string
		check      func(t *testing.T, p Parts)
	}{
		"MPITrainer on a deepspeed runtime": {
			yaml: "framework: mpi\ntrainer: {func: \"" + "def train(lr):\\n    print(lr)\\n" + "\", numProcPerNode: 4}",
			rt:   deepspeedRT, kind: "MPITrainer", frameworks: []string{"mpi", "deepspeed", "mlx"},
			check: func(t *testing.T, p Parts) {
				assert.Equal(t, []string{"mpirun", "--hostfile", "/etc/mpi/hostfile", "bash", "-c"}, p.Command[:5])
				assert.Contains(t, p.Command[5], `exec python "${TRAINSTEP_SCRIPT_DIR:-/home/mpiuser}/trainstep_train.py"`)
				assert.Equal(t, int32(4), *p.NumProcPerNode)
			},
		},
		"JAXTrainer": {
			yaml: "framework: jax\ntrainer: {func: \"def train(lr):\\n    print(lr)\\n\", numNodes: 2}",
			rt:   jaxRT, kind: "JAXTrainer", frameworks: []string{"jax"},
			check: func(t *testing.T, p Parts) {
				assert.Contains(t, p.Command[2], `exec python "trainstep_train.py"`)
				assert.Equal(t, int32(2), *p.NumNodes)
			},
		},
		"XGBoostTrainer": {
			yaml: "framework: xgboost\ntrainer: {func: \"def train(lr):\\n    print(lr)\\n\"}",
			rt:   xgbRT, kind: "XGBoostTrainer", frameworks: []string{"xgboost"},
			check: func(t *testing.T, p Parts) {
				assert.Contains(t, p.Command[2], `exec python "trainstep_train.py"`)
				assert.Nil(t, p.NumNodes, "the runtime's numNodes applies")
			},
		},
		"DeepSpeedTrainer on deepspeed (mpirun)": {
			yaml: "framework: deepspeed\ntrainer: {func: \"def train(lr):\\n    print(lr)\\n\", deepspeedConfig: {train_batch_size: 8}, numProcPerNode: 2}",
			rt:   deepspeedRT, kind: "DeepSpeedTrainer", frameworks: []string{"deepspeed", "torch"},
			check: func(t *testing.T, p Parts) {
				assert.Equal(t, "mpirun", p.Command[0])
				assert.JSONEq(t, `{"train_batch_size":8}`, env(p)[DeepSpeedConfigEnv])
				assert.Equal(t, int32(2), *p.NumProcPerNode)
			},
		},
		"DeepSpeedTrainer falls back to torch (torchrun)": {
			yaml: "framework: deepspeed\ntrainer: {func: \"def train(lr):\\n    print(lr)\\n\", deepspeedConfig: /etc/ds.json}",
			rt:   torchRT, kind: "DeepSpeedTrainer", frameworks: []string{"deepspeed", "torch"},
			check: func(t *testing.T, p Parts) {
				assert.Contains(t, p.Command[2], "exec torchrun")
				assert.Equal(t, "/etc/ds.json", env(p)[DeepSpeedConfigEnv])
			},
		},
		"CustomTrainer takes the runtime's entry point": {
			yaml: "framework: jax\ntrainer: {kind: CustomTrainer, func: \"def train(lr):\\n    print(lr)\\n\"}",
			rt:   torchRT, kind: "CustomTrainer", frameworks: []string{"jax"},
			check: func(t *testing.T, p Parts) { assert.Contains(t, p.Command[2], "exec torchrun") },
		},
		"CustomTrainer defaults to torch discovery": {
			yaml: "trainer: {kind: CustomTrainer, func: \"def train(lr):\\n    print(lr)\\n\"}",
			rt:   torchRT, kind: "CustomTrainer", frameworks: []string{"torch"},
		},
		"CustomTrainerContainer": {
			yaml: "trainer: {kind: CustomTrainerContainer, image: ghcr.io/me/t:1, command: [python, train.py], args: [--lr, '0.1'], numNodes: 3}",
			rt:   torchRT, kind: "CustomTrainerContainer", frameworks: []string{"torch"},
			check: func(t *testing.T, p Parts) {
				assert.Equal(t, "ghcr.io/me/t:1", p.Image)
				assert.Equal(t, []string{"python", "train.py"}, p.Command)
				assert.Equal(t, []string{"--lr", "0.1"}, p.Args)
			},
		},
		"TorchTuneTrainer hands the Trainer [tune, run] and its overrides as args": {
			yaml: "framework: torchtune\ntrainer: {epochs: 2, batchSize: 4, dtype: bf16, config: {optimizer.lr: 0.0002, model.lora_attn_modules: [q_proj, v_proj]}}",
			rt:   tuneRT, kind: "TorchTuneTrainer", frameworks: []string{"torchtune"},
			check: func(t *testing.T, p Parts) {
				assert.Equal(t, []string{"tune", "run"}, p.Command, "exactly the Trainer's torchtune entry point")
				assert.Equal(t, []string{"dataset=torchtune.datasets.instruct_dataset",
					"dtype=bf16", "batch_size=4", "epochs=2", "model.lora_attn_modules=[q_proj,v_proj]", "optimizer.lr=0.0002"}, p.Args,
					"the runtime's own overrides first (its immutable paths are the Trainer's to copy), then the step's: named fields in the SDK's order, then config sorted")
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tr, p := build(t, tc.yaml, tc.rt)
			assert.Equal(t, tc.kind, tr.Kind())
			assert.Equal(t, tc.frameworks, tr.Frameworks())
			if tc.check != nil {
				tc.check(t, p)
			}
		})
	}
}

func TestRuntimeConfigMerge(t *testing.T) {
	y := `
framework: torch
trainer:
  func: "def train():\n    pass\n"
  packagesToInstall: [numpy]
  pipIndexUrls: [https://own.example/simple]
  env: {A: trainer, B: trainer}
runtimeConfig:
  packagesToInstall: [torch==2.3, "transformers[torch]"]
  env: {A: runtimeConfig}
`
	_, p := build(t, y, torchRT)
	script := p.Command[2]
	assert.Contains(t, script, "PACKAGES=(torch==2.3 'transformers[torch]')", "a set runtimeConfig field replaces the trainer's")
	assert.Contains(t, script, "PIP_OPTS=(--index-url https://own.example/simple)", "an unset runtimeConfig field keeps the trainer's")
	assert.Equal(t, map[string]string{"A": "runtimeConfig"}, env(p), "field-level merge: runtimeConfig.env replaces trainer.env")
}

func TestValidateRuntime(t *testing.T) {
	cases := map[string]struct {
		yaml string
		rt   runtimes.Runtime
		msg  string
	}{
		"torch trainer, jax runtime": {"framework: torch\ntrainer: {func: \"" + "def f(): pass" + "\"}", jaxRT,
			"TorchTrainer supports frameworks [torch], but runtime 'jax-distributed' has framework 'jax'"},
		"function trainer, builtin runtime": {"trainer: {kind: CustomTrainer, func: \"def f(): pass\"}", tuneRT,
			"CustomTrainer requires a runtime with trainer_type=CustomTrainer, but runtime 'torchtune-llama3.2-1b' has trainer_type=BuiltinTrainer"},
		"config trainer, custom runtime":  {"framework: torchtune\ntrainer: {}", torchRT, "TorchTuneTrainer supports frameworks [torchtune]"},
		"mpi trainer needs an mpi policy": {"framework: mpi\ntrainer: {func: \"def f(): pass\"}", torchRT, "needs a runtime with mlPolicy.mpi"},
		"torch label without torch policy": {"framework: torch\ntrainer: {func: \"def f(): pass\"}",
			runtimes.Runtime{Name: "odd", Framework: "torch", Policy: runtimes.PolicyPlain, Type: runtimes.CustomTrainer}, "needs a runtime with mlPolicy.torch"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := resolve(t, tc.yaml).ValidateRuntime(&tc.rt)
			require.NotNil(t, err)
			assert.Equal(t, "runtime.name", err.Field)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestBuildRejects(t *testing.T) {
	cases := map[string]struct {
		yaml  string
		rt    runtimes.Runtime
		field string
	}{
		"reserved PET env on torch":     {"framework: torch\ntrainer: {func: \"def f(): pass\", env: {PET_NNODES: '2'}}", torchRT, "trainer.env[PET_NNODES]"},
		"reserved env in runtimeConfig": {"framework: torch\ntrainer: {func: \"def f(): pass\"}\nruntimeConfig: {env: {PET_MASTER_PORT: '1'}}", torchRT, "runtimeConfig.env[PET_MASTER_PORT]"},
		"maxRestarts twice":             {"framework: torch\ntrainer: {func: \"def f(): pass\", maxRestarts: 2, env: {PET_MAX_RESTARTS: '1'}}", torchRT, "trainer.env[PET_MAX_RESTARTS]"},
		"JAX env on a jax runtime":      {"framework: jax\ntrainer: {func: \"def f(): pass\", env: {JAX_PROCESS_ID: '0'}}", jaxRT, "trainer.env[JAX_PROCESS_ID]"},
		"OMPI env on an mpi runtime":    {"framework: mpi\ntrainer: {func: \"def f(): pass\", env: {OMPI_MCA_orte_default_hostfile: /h}}", deepspeedRT, "trainer.env[OMPI_MCA_orte_default_hostfile]"},
		// What the Trainer's torchtune webhook refuses (pkg/runtime/framework/plugins/torch/torchtune.go).
		"torchtune 1B on two nodes": {"framework: torchtune\ntrainer: {numNodes: 2}", tuneRT, "trainer.numNodes"},
		"torchtune LoRA on two nodes": {"framework: torchtune\ntrainer: {numNodes: 2, config: {model.lora_attn_modules: [q_proj]}}",
			runtimes.Runtime{Name: "torchtune-llama3.3-70b", Framework: "torchtune", Type: runtimes.BuiltinTrainer, NumNodes: 1, Command: tuneRT.Command}, "trainer.numNodes"},
		"torchtune output_dir":       {"framework: torchtune\ntrainer: {config: {output_dir: /tmp/x}}", tuneRT, "trainer.config[output_dir]"},
		"torchtune without tune run": {"framework: torchtune\ntrainer: {}", runtimes.Runtime{Name: "odd", Framework: "torchtune", Type: runtimes.BuiltinTrainer, Command: []string{"python", "x.py"}}, "runtime.name"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := step.Parse([]byte(tc.yaml))
			require.NoError(t, err)
			tr, errs := Builtin().Resolve(s)
			require.Empty(t, errs)
			_, errs = tr.Build(&tc.rt, s.RuntimeConfig)
			require.NotEmpty(t, errs)
			assert.Equal(t, tc.field, errs[0].Field, errs.ToAggregate().Error())
		})
	}
}

type tier2 struct{ *CustomTrainer }

func (tier2) Kind() string         { return "TransformersTrainer" }
func (tier2) Frameworks() []string { return []string{"torch"} }

func TestRegistryTier2(t *testing.T) {
	r := Builtin()
	require.NoError(t, r.Register(Registration{Kind: "TransformersTrainer", Frameworks: []string{"hf"},
		New: func(fw string, raw json.RawMessage) (Trainer, field.ErrorList) {
			c, errs := newCustom(fw, raw)
			if len(errs) > 0 {
				return nil, errs
			}
			return tier2{c.(*CustomTrainer)}, nil
		}}))
	s, err := step.Parse([]byte("framework: hf\ntrainer: {func: \"def f(): pass\"}"))
	require.NoError(t, err)
	tr, errs := r.Resolve(s)
	require.Empty(t, errs)
	assert.Equal(t, "TransformersTrainer", tr.Kind())

	assert.ErrorContains(t, r.Register(Registration{Kind: "TorchTrainer", New: newTorch}), "already registered")
	assert.ErrorContains(t, r.Register(Registration{Kind: "Other", Frameworks: []string{"torch"}, New: newTorch}), "already picks TorchTrainer")
}

// The Kubeflow SDK's trainer class names that are no kind here are refused on trainer.kind with
// the kind that does their job; an unknown kind still lists every kind.
func TestSDKTrainerKindsNameTheKindToWrite(t *testing.T) {
	cases := map[string]struct {
		kind string
		want []string
	}{
		"BuiltinTrainer": {"BuiltinTrainer", []string{`trainer.kind: Invalid value: "BuiltinTrainer"`, "trainer.kind: TorchTuneTrainer", "dtype, batchSize", "not under config"}},
		"JaxTrainer":     {"JaxTrainer", []string{`trainer.kind: Invalid value: "JaxTrainer"`, "write trainer.kind: JAXTrainer"}},
		"any case":       {"torchtrainer", []string{"write trainer.kind: TorchTrainer"}},
		"unknown":        {"TFTrainer", []string{`trainer.kind: Unsupported value: "TFTrainer"`, `"CustomTrainer"`, `"TorchTuneTrainer"`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := step.Parse([]byte("trainer: {kind: " + tc.kind + "}"))
			require.NoError(t, err)
			tr, errs := Builtin().Resolve(s)
			assert.Nil(t, tr)
			require.Len(t, errs, 1)
			for _, want := range tc.want {
				assert.Contains(t, errs[0].Error(), want)
			}
		})
	}
	// A hint names only a kind the registry has.
	r := NewRegistry()
	require.NoError(t, r.Register(Registration{Kind: "CustomTrainer", New: newCustom}))
	s, err := step.Parse([]byte("trainer: {kind: BuiltinTrainer}"))
	require.NoError(t, err)
	_, errs := r.Resolve(s)
	require.Len(t, errs, 1)
	assert.Equal(t, `trainer.kind: Unsupported value: "BuiltinTrainer": supported values: "CustomTrainer"`, errs[0].Error())
}

// Every standard resource name and the SDK's aliases are matched in any case, as the Kubeflow
// SDK matches them, so the pre-checks pass only what Kubernetes takes; an extended resource's
// name is kept as written (it is case-sensitive on the node), its domain lower-cased (Kubernetes
// takes a domain only in lower case).
func TestResourceNames(t *testing.T) {
	cases := map[string]struct {
		in   string
		want corev1.ResourceName
	}{
		"gpu alias":                  {"gpu", "nvidia.com/gpu"},
		"GPU alias any case":         {"GPU", "nvidia.com/gpu"},
		"storage alias":              {"Storage", "ephemeral-storage"},
		"mig alias":                  {"MIG-1g.5gb", "nvidia.com/mig-1g.5gb"},
		"cpu":                        {"CPU", "cpu"},
		"memory":                     {"Memory", "memory"},
		"ephemeral-storage":          {"EPHEMERAL-STORAGE", "ephemeral-storage"},
		"hugepages keeps its size":   {"HugePages-2Mi", "hugepages-2Mi"},
		"hugepages 1Gi":              {"HUGEPAGES-1Gi", "hugepages-1Gi"},
		"nvidia gpu any case":        {"NVIDIA.com/GPU", "nvidia.com/gpu"},
		"nvidia mig any case":        {"nvidia.com/MIG-1g.5gb", "nvidia.com/mig-1g.5gb"},
		"amd gpu any case":           {"AMD.COM/Gpu", "amd.com/gpu"},
		"extended keeps its case":    {"huawei.com/Ascend910", "huawei.com/Ascend910"},
		"extended domain lower-case": {"Huawei.COM/Ascend910", "huawei.com/Ascend910"},
		"vendor gpu name as is":      {"amd.com/gpu", "amd.com/gpu"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r, errs := resources(map[string]any{tc.in: json.Number("2")})
			require.Empty(t, errs)
			assert.Contains(t, r.Limits, tc.want)
			assert.Contains(t, r.Requests, tc.want)
			assert.Len(t, r.Limits, 1)
		})
	}
}

// A name Kubernetes would refuse when JobSet creates the Job is refused before anything is
// created, naming the field and saying what would do.
func TestResourceNamesKubernetesRefuses(t *testing.T) {
	cases := map[string]struct {
		in      map[string]any
		field   string
		wantMsg string
	}{
		"not a name":                 {map[string]any{"my gpu": json.Number("1")}, "trainer.resourcesPerNode[my gpu]", "a resource name such as example.com/device"},
		"no domain, not standard":    {map[string]any{"foo": json.Number("1")}, "trainer.resourcesPerNode[foo]", "needs its domain, such as example.com/foo"},
		"hugepages without a size":   {map[string]any{"hugepages-": json.Number("1")}, "trainer.resourcesPerNode[hugepages-]", "a page size such as 2Mi or 1Gi"},
		"hugepages with a bad size":  {map[string]any{"hugepages-2mb": json.Number("1")}, "trainer.resourcesPerNode[hugepages-2mb]", "a page size such as 2Mi or 1Gi"},
		"the quota prefix":           {map[string]any{"requests.example.com/foo": json.Number("1")}, "trainer.resourcesPerNode[requests.example.com/foo]", "extended resource"},
		"the same resource twice":    {map[string]any{"CPU": json.Number("1"), "cpu": json.Number("2")}, "trainer.resourcesPerNode[cpu]", "CPU and cpu both name cpu"},
		"an alias and its full name": {map[string]any{"storage": "1Gi", "ephemeral-storage": "2Gi"}, "trainer.resourcesPerNode[storage]", "ephemeral-storage and storage both name ephemeral-storage"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, errs := resources(tc.in)
			require.Len(t, errs, 1, "%v", errs)
			assert.Equal(t, tc.field, errs[0].Field)
			assert.Contains(t, errs[0].Error(), tc.wantMsg)
		})
	}
}
