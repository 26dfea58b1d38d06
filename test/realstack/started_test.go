package realstack_test

import (
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

func onlyTrainJob(t *testing.T, ns string) *trainer.TrainJob {
	t.Helper()
	tjs := testenv.TrainJobs(t.Context(), t, stack.Client, ns)
	require.Len(t, tjs, 1)
	return &tjs[0]
}

// slowInitRuntime installs a copy of the stock torch-distributed runtime with a model-initializer
// that stays Running for seconds (kwok's KWOK_RUN_SECONDS) before the nodes may start, as a slow
// model download would.
func slowInitRuntime(t *testing.T, seconds string) string {
	t.Helper()
	return stack.InstallInitializerRuntime(t, "torch-slow-init", trainjob.ModelInitializerJob, nil, corev1.Container{
		Image: "ghcr.io/kubeflow/trainer/model-initializer",
		Env:   []corev1.EnvVar{{Name: "STORAGE_URI", Value: "hf://meta-llama/Llama-3.2-1B-Instruct"}, {Name: "KWOK_RUN_SECONDS", Value: seconds}},
	})
}

// A model download longer than startTimeout: the initializer running is the job started, so the
// step is reported initializing, not failed, and completes. Sequential: while its runtime exists,
// a torch step that names none finds two and must pick one.
func TestASlowInitializerIsNotAStartTimeout(t *testing.T) {
	ns := stack.Namespace(t)
	rt := slowInitRuntime(t, "30")
	r := executor(t, ns, `
framework: torch
runtime: {name: `+rt+`, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 1
  func: |
    def train():
        pass
timeout: 3m
startTimeout: 10s
`)
	t.Logf("stderr:\n%s", r.Stderr)
	require.Equal(t, cli.ExitSucceeded, r.Code)
	assert.Equal(t, "Succeeded", r.Outputs["phase"])
	assert.Contains(t, r.Stderr, "Running: TrainJob "+r.Outputs["trainjob-name"]+" is initializing: model-initializer running")
	tj := onlyTrainJob(t, ns)
	assert.NotEmpty(t, tj.Annotations[trainjob.AnnotationStartedAt], "the start is recorded on the TrainJob")
	// The initializer really ran longer than the startTimeout before the node started.
	pods := stepPods(t, ns, tj.Name)
	require.Len(t, pods[trainjob.ModelInitializerJob], 1)
	require.Len(t, pods[trainjob.NodeJob], 1)
	init, node := pods[trainjob.ModelInitializerJob][0], pods[trainjob.NodeJob][0]
	assert.Greater(t, node.CreationTimestamp.Sub(tj.CreationTimestamp.Time), 10*time.Second,
		"node created after the startTimeout (initializer started %s, node created %s)", init.Status.StartTime, node.CreationTimestamp)
}
