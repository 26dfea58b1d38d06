package trainersim

import trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

// ModeLabel is the label a test puts on a step (spec labels reach the TrainJob) to tell the
// simulator what its TrainJob does: hold, succeed, fail or no-resources. Without it the trainer
// command really runs, locally.
const ModeLabel = "sim-mode"

// failLog is what every pod of a job failed with ModeLabel=fail prints.
var failLog = []string{"Traceback (most recent call last):", "RuntimeError: CUDA out of memory"}

// ByLabel decides a job's behavior from its ModeLabel.
func ByLabel(tj *trainer.TrainJob) Behavior {
	switch tj.Labels[ModeLabel] {
	case "hold":
		return Behavior{Mode: Hold}
	case "succeed":
		return Behavior{Mode: Succeed}
	case "fail":
		return Behavior{Mode: Fail, Log: append([]string(nil), failLog...)}
	case "no-resources":
		return Behavior{Mode: NoResources}
	}
	return Behavior{Mode: RunLocally}
}
