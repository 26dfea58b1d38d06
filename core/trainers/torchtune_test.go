package trainers

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/ptr"
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
