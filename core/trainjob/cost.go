package trainjob

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
)

// What a finished step cost, as outputs (docs/cost.md): where this attempt's wall time went
// (OutQueueWait, OutInitializing and OutTraining sum to OutDuration), what earlier attempts of
// the step spent before it (OutLost), and the accelerator hours it trained for (OutGPUHours).
// Empty until the step ends.
const (
	OutInitializing = "initializing-seconds"
	OutTraining     = "training-seconds"
	OutLost         = "lost-seconds"
	OutGPUHours     = "gpu-hours"
)

// CostOutputNames are the cost outputs, in OutputNames' order.
var CostOutputNames = []string{OutInitializing, OutTraining, OutLost, OutGPUHours}

// AnnotationAccelerators is how many accelerators one node of the TrainJob gets, as the planner
// counted them (Plan.Accelerators), in decimal. It is decided once, where the step's resources
// and the runtime's are both known, and carried with the job: a face's cache keeps of a TrainJob
// and its pods too little to count them again (TrimTrainJob, TrimPod), and a MultiKueue manager
// has no pods at all.
const AnnotationAccelerators = "trainstep.dev/accelerators"

// wholeDevices are the resources device plugins advertise for one whole accelerator each:
// NVIDIA's, AMD's, Intel's (i915 and xe drivers), Google's TPU, Intel Gaudi, AWS Neuron devices
// (neurondevice is the older plugins' name) and Huawei Ascend NPUs. The shares some plugins
// advertise beside them are not accelerators and never counted: HAMi's nvidia.com/gpumem and
// nvidia.com/gpucores, Intel's gpu.intel.com/millicores, gpu.intel.com/memory.max and
// gpu.intel.com/tiles, AWS's aws.amazon.com/neuroncore (a core of a device), Ascend's virtual
// NPUs (huawei.com/Ascend910-4c). A name is matched as written: device plugins advertise these
// in exactly this case.
var wholeDevices = []corev1.ResourceName{
	"nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/i915", "gpu.intel.com/xe", "google.com/tpu",
	"habana.ai/gaudi", "aws.amazon.com/neuron", "aws.amazon.com/neurondevice",
	"huawei.com/Ascend910", "huawei.com/Ascend310", "huawei.com/Ascend310P",
}

// migPrefix names a MIG instance of an NVIDIA GPU, nvidia.com/mig-<profile> (what a step's
// mig-<profile> becomes, core/trainers): one instance counts as one accelerator.
const migPrefix = "nvidia.com/mig-"

// isAccelerator reports whether a resource is an accelerator: one of wholeDevices, or a MIG
// instance.
func isAccelerator(name corev1.ResourceName) bool {
	return slices.Contains(wholeDevices, name) || strings.HasPrefix(string(name), migPrefix)
}

// countAccelerators counts the accelerators in a container's resources. Limits first: an
// extended resource's request, when set, equals its limit.
func countAccelerators(res corev1.ResourceRequirements) int64 {
	for _, list := range []corev1.ResourceList{res.Limits, res.Requests} {
		var n int64
		for name, q := range list {
			if isAccelerator(name) {
				n += q.Value()
			}
		}
		if n > 0 {
			return n
		}
	}
	return 0
}

// Accelerators is how many accelerators one node of the step's TrainJob gets: counted in its
// node container's resources as the Trainer resolves them, the runtime's node container's with
// the step's resourcesPerNode over them. Trainer v2.3 lays them over key by key (trainer#3602):
// a step that asks for cpu and memory keeps the runtime's GPUs. Earlier releases replace the
// runtime's resources whole with the step's. The v2.3 schema is known by the grace period its
// pod block takes (API.GracePeriod).
func (p *Plan) Accelerators() int64 {
	step := p.Parts.Resources
	if step == nil || (step.Limits == nil && step.Requests == nil) {
		return countAccelerators(p.Runtime.Resources)
	}
	if !p.API.GracePeriod {
		return countAccelerators(*step)
	}
	return countAccelerators(corev1.ResourceRequirements{
		Limits:   overlay(p.Runtime.Resources.Limits, step.Limits),
		Requests: overlay(p.Runtime.Resources.Requests, step.Requests),
	})
}

// overlay is base with over's quantities in place of its own, key by key.
func overlay(base, over corev1.ResourceList) corev1.ResourceList {
	out := maps.Clone(base)
	if out == nil && over != nil {
		out = corev1.ResourceList{}
	}
	maps.Copy(out, over)
	return out
}

// accelerators is how many accelerators one node of tj gets: the planner's count
// (AnnotationAccelerators). A TrainJob an earlier release made has none: its resourcesPerNode
// is counted the same way, and a runtime's own accelerators, which it never recorded, are 0.
// Never a pod's: a cached pod keeps no resources, and an MPI job's first trainer pod is its
// launcher.
func accelerators(tj *trainer.TrainJob) int64 {
	if v, ok := tj.Annotations[AnnotationAccelerators]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			return n
		}
	}
	if t := tj.Spec.Trainer; t != nil && t.ResourcesPerNode != nil {
		return countAccelerators(*t.ResourcesPerNode)
	}
	return 0
}

// trainingStart is when the trainer first ran in this run of the job: the earliest start of a
// trainer container of a pod that is not going away (a preempted run's pods are). Nil when no
// trainer container has started.
func trainingStart(trainerPods []corev1.Pod) *time.Time {
	var first *time.Time
	for i := range trainerPods {
		p := &trainerPods[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			var at time.Time
			switch {
			case cs.State.Running != nil:
				at = cs.State.Running.StartedAt.Time
			case cs.State.Terminated != nil:
				at = cs.State.Terminated.StartedAt.Time
			}
			if !at.IsZero() && (first == nil || at.Before(*first)) {
				first = &at
			}
		}
	}
	return first
}

// costOutputs renders what a finished attempt cost. The buckets are whole seconds that add up
// to duration-seconds exactly: initializing is what is left of it after the queue and the
// training, so no rounding shows as a gap.
func (o Observation) costOutputs(out map[string]string) {
	if o.StartTime == nil || o.CompletionTime == nil {
		return
	}
	wall := max(o.CompletionTime.Sub(*o.StartTime), 0)
	queued := time.Duration(0)
	if o.QueueWait != nil {
		queued = min(max(*o.QueueWait, 0), wall)
	}
	admitted := o.StartTime.Add(queued)
	trained := time.Duration(0) // a job whose trainer never ran spent its time initializing
	if s := o.TrainingStart; s != nil {
		from := *s
		if from.Before(admitted) {
			from = admitted
		}
		trained = max(o.CompletionTime.Sub(from), 0)
	}
	wallS, queuedS, trainedS := seconds(wall), seconds(queued), seconds(trained)
	trainedS = min(trainedS, wallS-queuedS)
	out[OutTraining] = strconv.FormatInt(trainedS, 10)
	out[OutInitializing] = strconv.FormatInt(wallS-queuedS-trainedS, 10)
	out[OutLost] = "0"
	if o.Lost != nil {
		out[OutLost] = strconv.FormatInt(seconds(max(*o.Lost, 0)), 10)
	}
	hours := float64(o.Accelerators) * float64(max(o.NumNodes, 0)) * trained.Hours()
	out[OutGPUHours] = strconv.FormatFloat(math.Round(hours*1000)/1000, 'f', -1, 64)
}

// seconds rounds d to whole seconds, as duration-seconds does.
func seconds(d time.Duration) int64 { return int64(math.Round(d.Seconds())) }
