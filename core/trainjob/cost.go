package trainjob

import (
	"math"
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

// acceleratorWords pick the accelerators among a node's resources: nvidia.com/gpu, amd.com/gpu,
// gpu.intel.com/i915, google.com/tpu, habana.ai/gaudi, aws.amazon.com/neuron and the like. A
// cpu, memory or storage request is not one.
var acceleratorWords = []string{"gpu", "tpu", "gaudi", "neuron"}

// isAccelerator says whether a resource is an accelerator: an extended resource (it has a
// domain) whose name says so.
func isAccelerator(name corev1.ResourceName) bool {
	domain, kind, ok := strings.Cut(string(name), "/")
	if !ok || strings.HasSuffix(domain, "kubernetes.io") {
		return false
	}
	for _, w := range acceleratorWords {
		if strings.Contains(strings.ToLower(domain+"/"+kind), w) {
			return true
		}
	}
	return false
}

// accelerators counts the accelerators one node asks for: the TrainJob's resourcesPerNode, else
// what the runtime gave its first trainer pod. Limits first: an extended resource's request,
// when set, equals its limit.
func accelerators(tj *trainer.TrainJob, trainerPods []corev1.Pod) int64 {
	var res *corev1.ResourceRequirements
	if t := tj.Spec.Trainer; t != nil && t.ResourcesPerNode != nil {
		res = t.ResourcesPerNode
	} else if len(trainerPods) > 0 && len(trainerPods[0].Spec.Containers) > 0 {
		res = &trainerPods[0].Spec.Containers[0].Resources
	}
	if res == nil {
		return 0
	}
	var n int64
	for _, list := range []corev1.ResourceList{res.Limits, res.Requests} {
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
