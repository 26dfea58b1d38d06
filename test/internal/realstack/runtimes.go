package realstack

import (
	"context"
	"strconv"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/trainstep/trainstep/core/trainjob"
)

// NoRetryRuntime is the name of the runtime InstallNoRetryRuntime installs.
const NoRetryRuntime = "torch-no-retry"

// InstallNoRetryRuntime installs, until the test ends, a copy of the stock torch-distributed
// ClusterTrainingRuntime whose Jobs do not retry a failed pod: with the Job default
// (backoffLimit 6, exponential back-off) a failing node is retried for minutes before the
// TrainJob fails. It returns the runtime's name.
func (s *Stack) InstallNoRetryRuntime(t testing.TB) string {
	t.Helper()
	return s.installTorchCopy(t, NoRetryRuntime, func(spec *trainer.TrainingRuntimeSpec) {
		for i := range spec.Template.Spec.ReplicatedJobs {
			spec.Template.Spec.ReplicatedJobs[i].Template.Spec.BackoffLimit = ptr.To[int32](0)
		}
	})
}

// GPURuntime is the name of the runtime InstallGPURuntime installs, and GPURuntimeGPUs how many
// GPUs its node container asks for.
const (
	GPURuntime     = "torch-gpu"
	GPURuntimeGPUs = 2
)

// InstallGPURuntime installs, until the test ends, a copy of the no-retry runtime whose node
// container asks for GPURuntimeGPUs GPUs (GPUResource): a step's GPUs from its runtime rather
// than its resourcesPerNode. It returns the runtime's name.
func (s *Stack) InstallGPURuntime(t testing.TB) string {
	t.Helper()
	gpus := resource.MustParse(strconv.Itoa(GPURuntimeGPUs))
	return s.installTorchCopy(t, GPURuntime, func(spec *trainer.TrainingRuntimeSpec) {
		for i := range spec.Template.Spec.ReplicatedJobs {
			job := &spec.Template.Spec.ReplicatedJobs[i].Template.Spec
			job.BackoffLimit = ptr.To[int32](0)
			for j := range job.Template.Spec.Containers {
				if c := &job.Template.Spec.Containers[j]; c.Name == trainjob.NodeContainer {
					c.Resources.Limits = corev1.ResourceList{GPUResource: gpus}
				}
			}
		}
	})
}

// QuotaRuntime is the name of the runtime InstallQuotaRuntime installs, and QuotaPriorityClass the
// PriorityClass its pods ask for.
const (
	QuotaRuntime       = "torch-quota"
	QuotaPriorityClass = "realstack-quota"
)

// InstallQuotaRuntime installs, until the test ends, a copy of the no-retry runtime whose pods ask
// for PriorityClass QuotaPriorityClass (installed with it): a ResourceQuota scoped to that class
// (scopeSelector PriorityClass) limits this runtime's pods alone, so a quota can refuse one step's
// pods in a namespace other steps share (Argo's). It returns the runtime's name.
func (s *Stack) InstallQuotaRuntime(t testing.TB) string {
	t.Helper()
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: QuotaPriorityClass}, Value: 0,
		PreemptionPolicy: ptr.To(corev1.PreemptNever), Description: "realstack: pods a test's ResourceQuota may limit"}
	require.NoError(t, client.IgnoreAlreadyExists(s.Client.Create(t.Context(), pc)), "creating PriorityClass %s", pc.Name)
	t.Cleanup(func() { _ = s.Client.Delete(context.Background(), pc) })
	return s.installTorchCopy(t, QuotaRuntime, func(spec *trainer.TrainingRuntimeSpec) {
		for i := range spec.Template.Spec.ReplicatedJobs {
			job := &spec.Template.Spec.ReplicatedJobs[i].Template.Spec
			job.BackoffLimit = ptr.To[int32](0)
			job.Template.Spec.PriorityClassName = QuotaPriorityClass
		}
	})
}

// InstallInitializerRuntime installs, as name, a copy of the stock torch-distributed runtime with an
// initializer Job (job: dataset-initializer or model-initializer) the nodes depend on, whose
// container (named job, as the Trainer's runtimes name it) is c, retried backoffLimit times
// (nil: the Job default).
func (s *Stack) InstallInitializerRuntime(t testing.TB, name, job string, backoffLimit *int32, c corev1.Container) string {
	t.Helper()
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
	return s.installTorchCopy(t, name, func(spec *trainer.TrainingRuntimeSpec) {
		jobs := spec.Template.Spec.ReplicatedJobs
		for i := range jobs {
			if jobs[i].Name == trainjob.NodeJob {
				jobs[i].DependsOn = []jobset.DependsOn{{Name: job, Status: jobset.DependencyComplete}}
			}
		}
		spec.Template.Spec.ReplicatedJobs = append([]jobset.ReplicatedJob{init}, jobs...)
	})
}

// installTorchCopy installs, as name and until the test ends, the stock torch-distributed
// ClusterTrainingRuntime (its labels too, so steps of the framework find it) with edit applied to
// its spec, and returns the name.
func (s *Stack) installTorchCopy(t testing.TB, name string, edit func(*trainer.TrainingRuntimeSpec)) string {
	t.Helper()
	stock := &trainer.ClusterTrainingRuntime{}
	require.NoError(t, s.Client.Get(t.Context(), client.ObjectKey{Name: "torch-distributed"}, stock), "reading the stock torch-distributed runtime")
	rt := &trainer.ClusterTrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: stock.Labels},
		Spec:       *stock.Spec.DeepCopy(),
	}
	edit(&rt.Spec)
	require.NoError(t, client.IgnoreAlreadyExists(s.Client.Create(t.Context(), rt)), "creating runtime %s", name)
	t.Cleanup(func() { _ = s.Client.Delete(context.Background(), rt) })
	return rt.Name
}
