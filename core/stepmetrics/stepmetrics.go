// Package stepmetrics counts what ended steps cost, by namespace and failure class: the same
// series, under each face's own prefix, on the Argo plugin's and the Tekton controller's
// /metrics (docs/cost.md). A face tells it each step that ends, once.
package stepmetrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/trainstep/trainstep/core/trainjob"
)

// NoFailure is the failure_class of a step that succeeded.
const NoFailure = "none"

// buckets are the cost outputs a step's seconds are counted under, by their bucket label.
var buckets = []struct{ label, output string }{
	{"queued", trainjob.OutQueueWait},
	{"initializing", trainjob.OutInitializing},
	{"training", trainjob.OutTraining},
	{"lost", trainjob.OutLost},
}

// Ended counts ended steps, their seconds by bucket and their GPU-hours.
type Ended struct {
	steps    *prometheus.CounterVec
	seconds  *prometheus.CounterVec
	gpuHours *prometheus.CounterVec
}

// New makes the series named prefix_steps_ended_total, prefix_step_seconds_total and
// prefix_step_gpu_hours_total.
func New(prefix string) *Ended {
	return &Ended{
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "_steps_ended_total",
			Help: "Steps that ended, by namespace, phase and failure class (none when it succeeded).",
		}, []string{"namespace", "phase", "failure_class"}),
		seconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "_step_seconds_total",
			Help: "Seconds ended steps spent, by namespace, failure class and bucket: queued, initializing, training, lost (earlier attempts).",
		}, []string{"namespace", "failure_class", "bucket"}),
		gpuHours: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "_step_gpu_hours_total",
			Help: "Accelerator hours ended steps trained for (nodes x accelerators per node x training time), by namespace and failure class.",
		}, []string{"namespace", "failure_class"}),
	}
}

// Collectors are the series, for a face's registry.
func (e *Ended) Collectors() []prometheus.Collector {
	return []prometheus.Collector{e.steps, e.seconds, e.gpuHours}
}

// Observe counts one ended step from its observation. A cost it does not know (a step that
// ended before its TrainJob did, or without one) adds nothing, and neither does a step the step
// cache served (obs.Cached): a hit, whose outputs are the stored ones of the job that trained,
// and a step that followed another step's TrainJob. Each TrainJob's cost is counted once, by
// the step that made it; a follower counts nothing even when that step let go of the job before
// its end (it was stopped, or timed out), so the counters never count a job twice.
func (e *Ended) Observe(obs trainjob.Observation) {
	class := NoFailure
	if obs.Failure != nil {
		class = string(obs.Failure.Class)
	}
	e.steps.WithLabelValues(obs.Namespace, string(obs.Phase), class).Inc()
	if obs.Cached != nil {
		return
	}
	outs := obs.Outputs()
	for _, b := range buckets {
		if v, err := strconv.ParseFloat(outs[b.output], 64); err == nil && v > 0 {
			e.seconds.WithLabelValues(obs.Namespace, class, b.label).Add(v)
		}
	}
	if v, err := strconv.ParseFloat(outs[trainjob.OutGPUHours], 64); err == nil && v > 0 {
		e.gpuHours.WithLabelValues(obs.Namespace, class).Add(v)
	}
}
