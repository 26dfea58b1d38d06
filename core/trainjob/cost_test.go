package trainjob

import (
	"context"
	"strconv"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/runtimes/stock"
	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainers"
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

// Only whole devices count, each as one: a plugin's shares of one (HAMi's GPU memory and cores,
// Intel's millicores, a Neuron core) named beside it would add thousands.
func TestCountAccelerators(t *testing.T) {
	limits := func(kv ...any) corev1.ResourceRequirements {
		l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("64Gi")}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i].(string))] = *resource.NewQuantity(int64(kv[i+1].(int)), resource.DecimalSI)
		}
		return corev1.ResourceRequirements{Limits: l, Requests: l.DeepCopy()}
	}
	cases := map[string]struct {
		res  corev1.ResourceRequirements
		want int64
	}{
		"nvidia": {res: limits("nvidia.com/gpu", 4), want: 4},
		"HAMi's memory and cores are shares of it": {res: limits("nvidia.com/gpu", 1, "nvidia.com/gpumem", 16000, "nvidia.com/gpucores", 50), want: 1},
		"a MIG instance":                         {res: limits("nvidia.com/mig-1g.5gb", 2), want: 2},
		"amd":                                    {res: limits("amd.com/gpu", 2), want: 2},
		"intel, i915 with millicores and memory": {res: limits("gpu.intel.com/i915", 1, "gpu.intel.com/millicores", 500, "gpu.intel.com/memory.max", 8000000000), want: 1},
		"intel xe":                               {res: limits("gpu.intel.com/xe", 2), want: 2},
		"tpu":                                    {res: limits("google.com/tpu", 8), want: 8},
		"gaudi":                                  {res: limits("habana.ai/gaudi", 8), want: 8},
		"neuron devices, not cores":              {res: limits("aws.amazon.com/neuron", 1, "aws.amazon.com/neuroncore", 2), want: 1},
		"neuron cores alone":                     {res: limits("aws.amazon.com/neuroncore", 2), want: 0},
		"ascend":                                 {res: limits("huawei.com/Ascend910", 8), want: 8},
		"an ascend virtual NPU is a share":       {res: limits("huawei.com/Ascend910-4c", 1), want: 0},
		"not an accelerator":                     {res: limits("example.com/fpga-slot", 3), want: 0},
		"a GPU-sounding name that is none":       {res: limits("example.com/gpu-slot", 3), want: 0},
		"cpu only":                               {res: limits(), want: 0},
		"requests when no limit says":            {res: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}}, want: 2},
		"none asked":                             {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, countAccelerators(tc.res))
		})
	}
}

// gpuRuntimes are the stock runtimes with GPUs in the runtime: torch-distributed's node asks for
// 2, and deepspeed-distributed's nodes 2 each while its launcher (the job labelled trainer)
// asks for none.
type gpuRuntimes struct{ t *testing.T }

func (g gpuRuntimes) List(context.Context, string) (runtimes.Catalog, error) {
	objs, err := stock.Objects()
	require.NoError(g.t, err)
	for i := range objs {
		u := &objs[i]
		if u.GetName() != "torch-distributed" && u.GetName() != "deepspeed-distributed" {
			continue
		}
		jobs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "replicatedJobs")
		for _, j := range jobs {
			job := j.(map[string]any)
			if job["name"] != runtimes.NodeJob {
				continue
			}
			path := []string{"template", "spec", "template", "spec", "containers"}
			ctrs, _, _ := unstructured.NestedSlice(job, path...)
			ctrs[0].(map[string]any)["resources"] = map[string]any{"limits": map[string]any{"nvidia.com/gpu": "2"}}
			require.NoError(g.t, unstructured.SetNestedSlice(job, ctrs, path...))
		}
		require.NoError(g.t, unstructured.SetNestedSlice(u.Object, jobs, "spec", "template", "spec", "replicatedJobs"))
	}
	return runtimes.NewCatalog(objs), nil
}

// planned is a step planned against gpuRuntimes.
func planned(t *testing.T, stepYAML string, api API) *Plan {
	t.Helper()
	s, err := step.Parse([]byte(stepYAML))
	require.NoError(t, err)
	p, err := (&Planner{Trainers: trainers.Builtin(), Runtimes: gpuRuntimes{t}, API: &api}).Plan(t.Context(), s, "team")
	require.NoError(t, err)
	return p
}

var costID = Identity{Engine: "cli", OwnerUID: "u", StepKey: "k"}

// plannedJob is the TrainJob a step planned against gpuRuntimes becomes.
func plannedJob(t *testing.T, stepYAML string, api API) *trainer.TrainJob {
	t.Helper()
	return planned(t, stepYAML, api).TrainJob(costID)
}

// The planner decides how many accelerators a node gets, where both the step's resources and
// the runtime's are known, and the TrainJob carries it: on Trainer v2.3 the step's
// resourcesPerNode is laid over the runtime's key by key, before it replaces them.
func TestPlanCountsAcceleratorsOnTheTrainJob(t *testing.T) {
	v22 := AssumedAPI
	v22.GracePeriod, v22.Source = false, "Trainer v2.2"
	fn := `func: "def train():\n    pass\n"`
	cases := map[string]struct {
		step string
		api  API
		want string
	}{
		"the runtime's GPUs":                               {step: "framework: torch\ntrainer: {" + fn + ", numNodes: 2}\n", api: AssumedAPI, want: "2"},
		"the step's GPUs over the runtime's":               {step: "framework: torch\ntrainer: {" + fn + ", resourcesPerNode: {gpu: 4}}\n", api: AssumedAPI, want: "4"},
		"v2.3: cpu asked, the runtime's GPUs kept":         {step: "framework: torch\ntrainer: {" + fn + ", resourcesPerNode: {cpu: 4}}\n", api: AssumedAPI, want: "2"},
		"v2.2: the step's resources replace the runtime's": {step: "framework: torch\ntrainer: {" + fn + ", resourcesPerNode: {cpu: 4}}\n", api: v22, want: "0"},
		"a MIG instance":                                   {step: "framework: xgboost\ntrainer: {" + fn + ", resourcesPerNode: {mig-1g.5gb: 1}}\n", api: AssumedAPI, want: "1"},
		"MPI: a node's, not the launcher's":                {step: "framework: deepspeed\ntrainer: {" + fn + ", numNodes: 2}\n", api: AssumedAPI, want: "2"},
		"none":                                             {step: "framework: xgboost\ntrainer: {" + fn + "}\n", api: AssumedAPI, want: "0"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := plannedJob(t, tc.step, tc.api)
			assert.Equal(t, tc.want, tj.Annotations[AnnotationAccelerators])
		})
	}
	tj := plannedJob(t, "framework: torch\ntrainer: {"+fn+"}\n", AssumedAPI)
	assert.Nil(t, tj.Spec.Trainer.ResourcesPerNode, "the runtime's resources stay the runtime's")
	v21 := v22
	v21.PodMechanism, v21.ActiveDeadline = PodTemplateOverrides, false
	obj, err := planned(t, "framework: torch\ntrainer: {"+fn+"}\n", v21).Object(costID)
	require.NoError(t, err)
	assert.IsType(t, &unstructured.Unstructured{}, obj, "Trainer v2.1's TrainJob")
	assert.Equal(t, "2", obj.GetAnnotations()[AnnotationAccelerators])
}

// gpu-hours is the same on every face: the Argo plugin and the Tekton controller read a TrainJob
// and its pods from caches that keep neither's resources (TrimTrainJob, TrimPod), and the count
// comes from the job's annotation, never from a pod (an MPI job's first trainer pod is its
// launcher).
func TestGPUHoursOfATrimmedTrainJob(t *testing.T) {
	fn := `func: "def train():\n    pass\n"`
	earlier := func(res corev1.ResourceList) *trainer.TrainJob {
		// Made by a release before the annotation: its count is its resourcesPerNode's.
		return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "team"},
			Spec: trainer.TrainJobSpec{Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](2),
				ResourcesPerNode: &corev1.ResourceRequirements{Limits: res, Requests: res.DeepCopy()}}}}
	}
	cases := map[string]struct {
		tj       *trainer.TrainJob
		launcher bool
		want     string // 2 nodes, an hour of training
	}{
		"GPUs from resourcesPerNode": {tj: plannedJob(t, "framework: torch\ntrainer: {"+fn+", numNodes: 2, resourcesPerNode: {gpu: 4}}\n", AssumedAPI), want: "8"},
		"GPUs from the runtime":      {tj: plannedJob(t, "framework: torch\ntrainer: {"+fn+", numNodes: 2}\n", AssumedAPI), want: "4"},
		"MPI: the nodes' GPUs, not the launcher's": {tj: plannedJob(t, "framework: deepspeed\ntrainer: {"+fn+", numNodes: 2}\n", AssumedAPI),
			launcher: true, want: "4"},
		"an earlier release's job":                                 {tj: earlier(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1"), "nvidia.com/gpumem": resource.MustParse("16000")}), want: "2"},
		"an earlier release's job, intel":                          {tj: earlier(corev1.ResourceList{"gpu.intel.com/i915": resource.MustParse("1"), "gpu.intel.com/millicores": resource.MustParse("500")}), want: "2"},
		"an earlier release's job, GPUs from its runtime: unknown": {tj: earlier(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}), want: "0"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := tc.tj.DeepCopy()
			tj.Name, tj.CreationTimestamp = "job", metav1.NewTime(t0)
			tj.Status.Conditions = []metav1.Condition{at(cond(trainer.TrainJobComplete, metav1.ConditionTrue, "AllJobsCompleted"), t0.Add(time.Hour))}
			var pods []corev1.Pod
			started := func(p corev1.Pod, res corev1.ResourceList) corev1.Pod {
				p.Spec.Containers = []corev1.Container{{Name: NodeContainer, Resources: corev1.ResourceRequirements{Limits: res}}}
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: NodeContainer, State: corev1.ContainerState{
					Terminated: &corev1.ContainerStateTerminated{StartedAt: metav1.NewTime(t0)}}}}
				return p
			}
			if tc.launcher {
				pods = append(pods, started(pod("job", LauncherJob, 0, corev1.PodSucceeded), corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}))
			}
			for i := range 2 {
				pods = append(pods, started(pod("job", NodeJob, i, corev1.PodSucceeded), corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}))
			}
			cached, err := TrimTrainJob(tj)
			require.NoError(t, err)
			for i := range pods {
				p, err := TrimPod(&pods[i])
				require.NoError(t, err)
				pods[i] = *p.(*corev1.Pod)
			}
			out := Observe(cached.(*trainer.TrainJob), pods).Outputs()
			assert.Equal(t, "3600", out[OutTraining])
			assert.Equal(t, tc.want, out[OutGPUHours])
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
