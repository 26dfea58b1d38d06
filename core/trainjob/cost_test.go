package trainjob

import (
	"strconv"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestCostOutputs(t *testing.T) {
	at := func(s int) *time.Time { v := time.Unix(1000+int64(s), 0); return &v }
	dur := func(s float64) *time.Duration { d := time.Duration(s * float64(time.Second)); return &d }
	cases := map[string]struct {
		obs  Observation
		want map[string]string // the cost outputs; nil: all empty
	}{
		"running: nothing yet": {obs: Observation{StartTime: at(0), TrainingStart: at(5)}},
		"queued, initialized, trained": {
			obs:  Observation{StartTime: at(0), CompletionTime: at(100), QueueWait: dur(20), TrainingStart: at(30), NumNodes: 2, Accelerators: 4},
			want: map[string]string{OutInitializing: "10", OutTraining: "70", OutLost: "0", OutGPUHours: "0.156"},
		},
		"never trained: all initializing": {
			obs:  Observation{StartTime: at(0), CompletionTime: at(60), QueueWait: dur(10), NumNodes: 1, Accelerators: 8},
			want: map[string]string{OutInitializing: "50", OutTraining: "0", OutLost: "0", OutGPUHours: "0"},
		},
		"a start before the last admission counts from the admission": {
			obs:  Observation{StartTime: at(0), CompletionTime: at(100), QueueWait: dur(40), TrainingStart: at(10), NumNodes: 1},
			want: map[string]string{OutInitializing: "0", OutTraining: "60", OutLost: "0", OutGPUHours: "0"},
		},
		"rounding never shows as a gap": {
			obs:  Observation{StartTime: at(0), CompletionTime: at(10), QueueWait: dur(2.5), TrainingStart: at(5), NumNodes: 1},
			want: map[string]string{OutInitializing: "2", OutTraining: "5", OutLost: "0", OutGPUHours: "0"},
		},
		"earlier attempts are lost": {
			obs:  Observation{StartTime: at(0), CompletionTime: at(3600), TrainingStart: at(0), NumNodes: 1, Accelerators: 1, Lost: dur(1800)},
			want: map[string]string{OutInitializing: "0", OutTraining: "3600", OutLost: "1800", OutGPUHours: "1"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out := tc.obs.Outputs()
			for _, n := range CostOutputNames {
				assert.Equal(t, tc.want[n], out[n], n)
			}
			if tc.want != nil {
				var sum int
				for _, n := range []string{OutQueueWait, OutInitializing, OutTraining} {
					v, _ := strconv.Atoi(out[n]) // queue-wait is empty when never suspended
					sum += v
				}
				assert.Equal(t, out[OutDuration], strconv.Itoa(sum), "the buckets sum to duration-seconds")
			}
		})
	}
}

func TestAccelerators(t *testing.T) {
	gpus := func(name string, n int64) *corev1.ResourceRequirements {
		return &corev1.ResourceRequirements{Limits: corev1.ResourceList{
			corev1.ResourceName(name): *resource.NewQuantity(n, resource.DecimalSI),
			corev1.ResourceCPU:        resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("64Gi"),
		}}
	}
	podWith := func(res *corev1.ResourceRequirements) []corev1.Pod {
		return []corev1.Pod{{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: NodeContainer, Resources: *res}}}}}
	}
	cases := map[string]struct {
		perNode *corev1.ResourceRequirements
		pods    []corev1.Pod
		want    int64
	}{
		"nvidia":                   {perNode: gpus("nvidia.com/gpu", 4), want: 4},
		"amd":                      {perNode: gpus("amd.com/gpu", 2), want: 2},
		"tpu":                      {perNode: gpus("google.com/tpu", 8), want: 8},
		"neuron":                   {perNode: gpus("aws.amazon.com/neuron", 1), want: 1},
		"not an accelerator":       {perNode: gpus("example.com/fpga-slot", 3), want: 0},
		"kubernetes.io is not one": {perNode: gpus("hugepages-2Mi", 3), want: 0},
		"cpu only":                 {perNode: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}, want: 0},
		"from the runtime's pod":   {pods: podWith(gpus("nvidia.com/gpu", 2)), want: 2},
		"none asked":               {want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := &trainer.TrainJob{Spec: trainer.TrainJobSpec{Trainer: &trainer.Trainer{ResourcesPerNode: tc.perNode}}}
			assert.Equal(t, tc.want, accelerators(tj, tc.pods))
		})
	}
}

func TestTrainingStart(t *testing.T) {
	started := func(s int64, running, going bool) corev1.Pod {
		p := corev1.Pod{}
		at := metav1.NewTime(time.Unix(s, 0))
		if running {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at}}}}
		} else {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{StartedAt: at}}}}
		}
		if going {
			p.DeletionTimestamp = ptr.To(metav1.Now())
		}
		return p
	}
	assert.Nil(t, trainingStart(nil))
	assert.Nil(t, trainingStart([]corev1.Pod{{}}), "a pod whose container waits has not started")
	got := trainingStart([]corev1.Pod{started(50, true, false), started(40, false, false), started(10, true, true)})
	if assert.NotNil(t, got) {
		assert.Equal(t, time.Unix(40, 0), *got, "the earliest start of a pod that is not going away")
	}
}
