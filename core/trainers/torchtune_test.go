package trainers

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/trainstep/trainstep/core/step"
)

// TuneCommand follows the Trainer's getRecipeAndConfig and command mutation
// (pkg/runtime/framework/plugins/torch, v2.3.0) case by case.
func TestTuneCommand(t *testing.T) {
	rtCmd := []string{"tune", "run", "--rdzv_endpoint=localhost:29500", "full_finetune_distributed", "--config", "llama3_2/1B_full",
		"dataset=torchtune.datasets.instruct_dataset", "output_dir=/workspace/output", "tokenizer.path=/workspace/model/original/tokenizer.model"}
	immutable := []string{"output_dir=/workspace/output", "tokenizer.path=/workspace/model/original/tokenizer.model"}
	cases := map[string]struct {
		runtime string
		nodes   int32
		procs   *int32
		gpus    int
		args    []string
		want    []string
	}{
		"one node, two GPUs: full distributed with rendezvous": {"torchtune-llama3.2-1b", 1, nil, 2, nil,
			append([]string{"tune", "run", "--rdzv_endpoint=n0:29400", "full_finetune_distributed", "--config", "llama3_2/1B_full"}, immutable...)},
		"one GPU: single device, no rendezvous": {"torchtune-llama3.2-1b", 1, nil, 1, []string{"epochs=1"},
			append(append([]string{"tune", "run", "full_finetune_single_device", "--config", "llama3_2/1B_full_single_device"}, immutable...), "epochs=1")},
		"one process with LoRA": {"torchtune-llama3.2-3b", 1, ptr.To[int32](1), 4, []string{"model.lora_attn_modules=[q_proj]"},
			append(append([]string{"tune", "run", "lora_finetune_single_device", "--config", "llama3_2/3B_lora_single_device"}, immutable...), "model.lora_attn_modules=[q_proj]")},
		"QLoRA, several GPUs": {"torchtune-llama3.2-1b", 1, nil, 2, []string{"model.lora_attn_modules=[q_proj]", "model.quantize_base=True"},
			append(append([]string{"tune", "run", "--rdzv_endpoint=n0:29400", "lora_finetune_distributed", "--config", "llama3_2/1B_qlora"}, immutable...), "model.lora_attn_modules=[q_proj]", "model.quantize_base=True")},
		"DoRA is not QLoRA": {"torchtune-llama3.2-1b", 1, nil, 2, []string{"model.lora_attn_modules=[q_proj]", "model.quantize_base=True", "model.use_dora=True"},
			append(append([]string{"tune", "run", "--rdzv_endpoint=n0:29400", "lora_finetune_distributed", "--config", "llama3_2/1B_lora"}, immutable...), "model.lora_attn_modules=[q_proj]", "model.quantize_base=True", "model.use_dora=True")},
		"70B on two nodes": {"torchtune-llama3.3-70b", 2, nil, 8, nil,
			append([]string{"tune", "run", "--rdzv_endpoint=n0:29400", "full_finetune_distributed", "--config", "llama3_3/70B_full_multinode"}, immutable...)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, TuneCommand(tc.runtime, rtCmd, tc.nodes, tc.procs, tc.gpus, "n0:29400", tc.args))
		})
	}
}

// The SDK's TorchTuneConfig fields make the overrides the Kubeflow SDK makes, in its order:
// kubeflow/sdk kubeflow/trainer/backends/kubernetes/utils.py, get_args_using_torchtune_config,
// get_args_from_peft_config and get_args_from_dataset_preprocess_config (the cases marked "SDK
// test" are its utils_test.py and backend_test.py cases). Each want is what that Python returns
// for the same TorchTuneConfig, except dtype: the SDK writes str() of its enum
// (dtype=DataType.BF16, kubeflow/sdk#548), trainstep the value torchtune reads.
func TestTorchTuneSDKMapping(t *testing.T) {
	cases := map[string]struct {
		trainer string // the trainer block's fields
		want    []string
	}{
		"dtype, batch size, epochs, loss": {
			trainer: "{loss: torchtune.modules.loss.CEWithChunkedOutputLoss, epochs: 1, batchSize: 2, dtype: fp32}",
			want:    []string{"dtype=fp32", "batch_size=2", "epochs=1", "loss=torchtune.modules.loss.CEWithChunkedOutputLoss"},
		},
		"LoRA (SDK test: valid flow with builtin trainer)": {
			trainer: "{peftConfig: {applyLoraToMlp: true, loraRank: 8, loraAlpha: 16, loraDropout: 0.1}}",
			want: []string{"model.apply_lora_to_mlp=True", "model.lora_rank=8", "model.lora_alpha=16", "model.lora_dropout=0.1",
				"model.lora_attn_modules=[q_proj,v_proj,output_proj]"},
		},
		"loraDropout 0 is not dropped (SDK test)": {
			trainer: "{peftConfig: {loraDropout: 0}}",
			want:    []string{"model.lora_dropout=0.0", "model.lora_attn_modules=[q_proj,v_proj,output_proj]"},
		},
		"applyLoraToMlp false is not dropped (SDK test)": {
			trainer: "{peftConfig: {applyLoraToMlp: false}}",
			want:    []string{"model.apply_lora_to_mlp=False", "model.lora_attn_modules=[q_proj,v_proj,output_proj]"},
		},
		"an empty peftConfig is LoRA with the SDK's default modules": {
			trainer: "{peftConfig: {}}",
			want:    []string{"model.lora_attn_modules=[q_proj,v_proj,output_proj]"},
		},
		"QDoRA: every LoraConfig field, in field_map's order whatever the step's": {
			trainer: "{peftConfig: {useDora: true, quantizeBase: true, loraAttnModules: [q_proj, k_proj, v_proj, output_proj], loraDropout: 0.05, loraAlpha: 32, loraRank: 16, applyLoraToOutput: false, applyLoraToMlp: true}}",
			want: []string{"model.apply_lora_to_mlp=True", "model.apply_lora_to_output=False", "model.lora_rank=16", "model.lora_alpha=32",
				"model.lora_dropout=0.05", "model.quantize_base=True", "model.use_dora=True", "model.lora_attn_modules=[q_proj,k_proj,v_proj,output_proj]"},
		},
		"trainOnInput false is not dropped (SDK test)": {
			trainer: "{datasetPreprocessConfig: {trainOnInput: false}}",
			want:    []string{"dataset=torchtune.datasets.instruct_dataset", "dataset.train_on_input=False"},
		},
		"an instruct dataset, every field": {
			trainer: `{datasetPreprocessConfig: {columnMap: {input: question, output: "it's"}, newSystemPrompt: You answer briefly., trainOnInput: true, split: "train[:10%]", source: parquet}}`,
			want: []string{"dataset=torchtune.datasets.instruct_dataset", "dataset.source=parquet", "dataset.split=train[:10%]",
				"dataset.train_on_input=True", "dataset.new_system_prompt=You answer briefly.", `dataset.column_map={'input': 'question', 'output': "it's"}`},
		},
		"all together: the top level, then PEFT, then the dataset": {
			trainer: "{datasetPreprocessConfig: {source: json}, peftConfig: {loraRank: 4}, epochs: 3, dtype: bf16}",
			want: []string{"dtype=bf16", "epochs=3", "model.lora_rank=4", "model.lora_attn_modules=[q_proj,v_proj,output_proj]",
				"dataset=torchtune.datasets.instruct_dataset", "dataset.source=json"},
		},
		"config keys follow, sorted": {
			trainer: "{epochs: 1, config: {optimizer.lr: 0.0002, gradient_accumulation_steps: 8}}",
			want:    []string{"epochs=1", "gradient_accumulation_steps=8", "optimizer.lr=0.0002"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, p := build(t, "framework: torchtune\ntrainer: "+tc.trainer, tuneRT)
			assert.Equal(t, tc.want, p.Args[len(runtimeOverrides(tuneRT.Command)):], "after the runtime's own overrides")
		})
	}
}

func TestTorchTuneSDKFieldsRefused(t *testing.T) {
	cases := map[string]struct{ trainer, field, want string }{
		"unknown attention module": {"{peftConfig: {loraAttnModules: [q_proj, gate_proj]}}", "trainer.peftConfig.loraAttnModules[1]",
			`supported values: "q_proj", "k_proj", "v_proj", "output_proj"`},
		"no attention module":     {"{peftConfig: {loraAttnModules: []}}", "trainer.peftConfig.loraAttnModules", "leave it out for the SDK's default"},
		"module twice":            {"{peftConfig: {loraAttnModules: [q_proj, q_proj]}}", "trainer.peftConfig.loraAttnModules[1]", "Duplicate"},
		"rank 0":                  {"{peftConfig: {loraRank: 0}}", "trainer.peftConfig.loraRank", "must be 1 or more"},
		"dropout 1":               {"{peftConfig: {loraDropout: 1}}", "trainer.peftConfig.loraDropout", "probability"},
		"source":                  {"{datasetPreprocessConfig: {source: tsv}}", "trainer.datasetPreprocessConfig.source", `"json", "csv", "parquet"`},
		"column map needs output": {"{datasetPreprocessConfig: {columnMap: {input: q}}}", "trainer.datasetPreprocessConfig.columnMap[output]", "needs both input and output"},
		"unknown column":          {"{datasetPreprocessConfig: {columnMap: {input: q, output: a, prompt: p}}}", "trainer.datasetPreprocessConfig.columnMap[prompt]", `"input", "output", "image"`},
		"set twice":               {"{epochs: 1, config: {epochs: 2}}", "trainer.config[epochs]", "epochs is also set by trainer.epochs; set it in one place"},
		"set twice, PEFT":         {"{peftConfig: {loraRank: 8}, config: {model.lora_rank: 16}}", "trainer.config[model.lora_rank]", "also set by trainer.peftConfig.loraRank"},
		"set twice, dataset":      {"{datasetPreprocessConfig: {}, config: {dataset: x}}", "trainer.config[dataset]", "also set by trainer.datasetPreprocessConfig"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := step.Parse([]byte("framework: torchtune\ntrainer: " + tc.trainer))
			require.NoError(t, err)
			_, errs := Builtin().Resolve(s)
			require.NotEmpty(t, errs)
			assert.Equal(t, tc.field, errs[0].Field, errs.ToAggregate().Error())
			assert.Contains(t, errs[0].Error(), tc.want)
		})
	}
	t.Run("snake_case gets the camelCase name", func(t *testing.T) {
		s, err := step.Parse([]byte("framework: torchtune\ntrainer: {peft_config: {lora_rank: 8}}"))
		require.NoError(t, err)
		_, errs := Builtin().Resolve(s)
		require.NotEmpty(t, errs)
		assert.Contains(t, errs.ToAggregate().Error(), `did you mean "peftConfig"?`)
	})
}

// LoRA from peftConfig is LoRA to the Trainer too: one node only.
func TestTorchTunePeftConfigIsOneNode(t *testing.T) {
	s, err := step.Parse([]byte("framework: torchtune\ntrainer: {numNodes: 2, peftConfig: {loraRank: 8}}"))
	require.NoError(t, err)
	tr, errs := Builtin().Resolve(s)
	require.Empty(t, errs)
	rt := tuneRT
	rt.Name = "torchtune-llama3.3-70b"
	_, errs = tr.Build(&rt, nil)
	require.Len(t, errs, 1)
	assert.Equal(t, "trainer.numNodes", errs[0].Field)
	assert.Contains(t, errs[0].Error(), "trainer.peftConfig")
}
