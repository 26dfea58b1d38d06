package trainjob

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/core/runtimes/stock"
	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainers"
)

// A step written with the Kubeflow SDK's habits plans the TrainJob the user meant, or is refused
// with one error that names the field and what to write: never a second error on the same field
// that points elsewhere (framework: pytorch is no case for trainer.kind: CustomTrainer).
func TestPlanSDKHabits(t *testing.T) {
	fn := "trainer: {func: \"def train():\\n    pass\\n\"}\n"
	cases := map[string]struct {
		step        string
		wantRuntime string
		wantErr     string // the one error's text, in part
	}{
		"runtime as a name": {step: "framework: torch\nruntime: torch-distributed\n" + fn, wantRuntime: "torch-distributed"},
		"runtime as a name, BuiltinTrainer's runtime": {step: "framework: torchtune\nruntime: torchtune-llama3.2-1b\ntrainer: {epochs: 1}\n",
			wantRuntime: "torchtune-llama3.2-1b"},
		"runtime as a name that is not there": {step: "framework: torch\nruntime: torch-nope\n" + fn, wantErr: "runtime.name"},
		"framework pytorch":                   {step: "framework: pytorch\n" + fn, wantErr: "framework: torch"},
		"framework pytorch, a kind":           {step: "framework: pytorch\ntrainer: {kind: CustomTrainer, func: \"def train():\\n    pass\\n\"}\n", wantErr: "framework: torch"},
		"framework in capitals":               {step: "framework: Torch\n" + fn, wantErr: "lowercase RFC 1123 label"},
		"BuiltinTrainer":                      {step: "trainer: {kind: BuiltinTrainer, config: {epochs: 1}}\n", wantErr: "trainer.kind: TorchTuneTrainer"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := step.Parse([]byte(tc.step))
			require.NoError(t, err)
			p, err := (&Planner{Trainers: trainers.Builtin(), Runtimes: stock.Source{}}).Plan(t.Context(), s, "team")
			if tc.wantErr != "" {
				var ie *step.InvalidError
				require.ErrorAs(t, err, &ie)
				require.Len(t, ie.Errs, 1, "one problem, said once: %v", err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantRuntime, p.Runtime.Name)
			tj := p.TrainJob(Identity{Engine: "cli", OwnerUID: "u", StepKey: "k"})
			assert.Equal(t, tc.wantRuntime, tj.Spec.RuntimeRef.Name)
		})
	}
}
