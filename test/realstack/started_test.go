package realstack_test

import (
	"context"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

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
	return initializerRuntime(t, "torch-slow-init", trainjob.ModelInitializerJob, nil, corev1.Container{
		Image: "ghcr.io/kubeflow/trainer/model-initializer",
		Env:   []corev1.EnvVar{{Name: "STORAGE_URI", Value: "hf://meta-llama/Llama-3.2-1B-Instruct"}, {Name: "KWOK_RUN_SECONDS", Value: seconds}},
	})
}

// initializerRuntime installs, as name, a copy of the stock torch-distributed runtime with an
// initializer Job (job: dataset-initializer or model-initializer) the nodes depend on, whose
// container (named job, as the Trainer's runtimes name it) is c, retried backoffLimit times
// (nil: the Job default).
func initializerRuntime(t *testing.T, name, job string, backoffLimit *int32, c corev1.Container) string {
	t.Helper()
	stock := &trainer.ClusterTrainingRuntime{}
	require.NoError(t, stack.Client.Get(t.Context(), client.ObjectKey{Name: "torch-distributed"}, stock))
	rt := &trainer.ClusterTrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: stock.Labels},
		Spec:       *stock.Spec.DeepCopy(),
	}
	c.Name = job
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "initializer", MountPath: "/workspace"})
	init := jobset.ReplicatedJob{Name: job, Replicas: 1, Template: batchv1.JobTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"trainer.kubeflow.org/trainjob-ancestor-step": job}},
		Spec: batchv1.JobSpec{BackoffLimit: backoffLimit, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{c},
			// The Trainer's webhook asks an initializer for the volume it shares with the nodes.
			Volumes: []corev1.Volume{{Name: "initializer", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		}}},
	}}
	jobs := rt.Spec.Template.Spec.ReplicatedJobs
	for i := range jobs {
		if jobs[i].Name == trainjob.NodeJob {
			jobs[i].DependsOn = []jobset.DependsOn{{Name: job, Status: jobset.DependencyComplete}}
		}
	}
	rt.Spec.Template.Spec.ReplicatedJobs = append([]jobset.ReplicatedJob{init}, jobs...)
	require.NoError(t, client.IgnoreAlreadyExists(stack.Client.Create(t.Context(), rt)))
	t.Cleanup(func() { _ = stack.Client.Delete(context.Background(), rt) })
	return rt.Name
}

// An initializer that fails (a dataset that cannot be downloaded): while its Job retries, the
// step shows the initializer's own log, not a request for a container "node" it does not have;
// at the end the message names the initializer pod, its exit and termination message, and
// carries its log tail. Sequential: it sets the log every pod prints, and while its runtime
// exists a torch step that names none finds two.
func TestAFailingInitializerIsReportedInItsOwnWords(t *testing.T) {
	ns := stack.Namespace(t)
	stack.SetNodeLog(t, "Downloading dataset hf://trainstep/no-such-dataset", "huggingface_hub.errors.RepositoryNotFoundError: 404 Client Error")
	rt := initializerRuntime(t, "torch-failing-init", trainjob.DatasetInitializerJob, ptr.To[int32](1), corev1.Container{
		Image: "ghcr.io/kubeflow/trainer/dataset-initializer",
	})
	r := executor(t, ns, `
framework: torch
runtime: {name: `+rt+`, kind: ClusterTrainingRuntime}
initializer:
  dataset:
    storageUri: hf://trainstep/no-such-dataset
    env: {KWOK_FAIL: "1"}
trainer:
  numNodes: 1
  func: |
    def train():
        pass
timeout: 3m
`)
	t.Logf("stderr:\n%s", r.Stderr)
	require.Equal(t, cli.ExitFailed, r.Code)
	assert.Equal(t, "Failed", r.Outputs["phase"])
	msg := r.Outputs["message"]
	assert.Contains(t, msg, "dataset-initializer 0 (pod ")
	assert.Contains(t, msg, "failed (exit code 1): KWOK_FAIL=1", "the initializer's termination message")
	assert.Contains(t, msg, "(container dataset-initializer):")
	assert.Contains(t, msg, "RepositoryNotFoundError: 404 Client Error", "the initializer's log tail")
	assert.NotContains(t, msg, "no trainer pods")
	assert.NotContains(t, r.Stderr, "is not valid for pod", "the tail is asked of the initializer's own container")
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
