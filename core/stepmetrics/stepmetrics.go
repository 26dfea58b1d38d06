// Package stepmetrics counts the steps that ended and what they cost, by namespace and failure
// class: the same series, under the same names, from every face's long-lived component (the Argo
// janitor, the Tekton controller), told apart by their face label (docs/cost.md). A face tells
// it each step that ends, once: from its Observation, or from the outputs it wrote.
package stepmetrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/trainstep/trainstep/core/trainjob"
)

// NoFailure is the failure_class of a step that succeeded.
const NoFailure = "none"

// The series' names, which docs/cost.md and the Grafana dashboard query.
const (
	StepsEnded = "trainstep_steps_ended_total"
	Seconds    = "trainstep_step_seconds_total"
	GPUSeconds = "trainstep_step_gpu_seconds_total"
	CacheHits  = "trainstep_step_cache_hits_total"
	Retries    = "trainstep_step_retries_total"
)

// buckets are the cost outputs a step's seconds are counted under, by their bucket label.
var buckets = []struct{ label, output string }{
	{"queued", trainjob.OutQueueWait},
	{"initializing", trainjob.OutInitializing},
	{"training", trainjob.OutTraining},
	{"lost", trainjob.OutLost},
}

// Counted are the outputs Count reads: what a face that counts from stored outputs (the Argo
// janitor, from a Workflow's nodes) must keep of them.
var Counted = []string{trainjob.OutPhase, trainjob.OutFailureClass, trainjob.OutCacheHit,
	trainjob.OutQueueWait, trainjob.OutInitializing, trainjob.OutTraining, trainjob.OutLost, trainjob.OutGPUHours}

// Ended counts ended steps, their seconds by bucket, their accelerator seconds, the cache's
// hits and the retries.
type Ended struct {
	steps, seconds, gpuSeconds, cacheHits, retries *prometheus.CounterVec
}

// New makes the series, each with the constant label face (argo, tekton).
func New(face string) *Ended {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: prometheus.Labels{"face": face}}, labels)
	}
	return &Ended{
		steps: counter(StepsEnded,
			"Steps that ended, by namespace, phase and failure class (none when it succeeded).",
			"namespace", "phase", "failure_class"),
		seconds: counter(Seconds,
			"Seconds ended steps spent, by namespace, failure class and bucket: queued, initializing, training, lost (earlier attempts).",
			"namespace", "failure_class", "bucket"),
		gpuSeconds: counter(GPUSeconds,
			"Accelerator seconds ended steps trained for (nodes x accelerators per node x training time; gpu-hours x 3600), by namespace and failure class.",
			"namespace", "failure_class"),
		cacheHits: counter(CacheHits,
			"Ended steps the step cache served (a stored success, or another step's TrainJob they followed), by namespace.",
			"namespace"),
		retries: counter(Retries,
			"Ended steps that were a retry of an earlier attempt by the engine (Argo's retryStrategy, Tekton's retries), by namespace.",
			"namespace"),
	}
}

// Collectors are the series, for a registry.
func (e *Ended) Collectors() []prometheus.Collector {
	return []prometheus.Collector{e.steps, e.seconds, e.gpuSeconds, e.cacheHits, e.retries}
}

// Observe counts one ended step from its observation (Count). A step the step cache served
// (obs.Cached) is a hit however its outputs say so.
func (e *Ended) Observe(obs trainjob.Observation, retry bool) {
	outs := obs.Outputs()
	if obs.Cached != nil {
		outs[trainjob.OutCacheHit] = "true"
	}
	e.Count(obs.Namespace, outs, retry)
}

// Count counts one ended step from its outputs; retry says the engine ran it as a retry of an
// earlier attempt. A step whose phase is not terminal is not counted: it has not ended, and its
// phase would be a label value no dashboard expects. A cost it does not know (a step that ended
// before its TrainJob did, or without one) adds nothing, and neither does a step the step cache
// served (cache-hit true): a hit, whose outputs are the stored ones of the job that trained, and
// a step that followed another step's TrainJob. Each TrainJob's cost is counted once, by the
// step that made it; a follower counts nothing even when that step let go of the job before its
// end (it was stopped, or timed out), so the counters never count a job twice.
func (e *Ended) Count(namespace string, outs map[string]string, retry bool) {
	phase := trainjob.Phase(outs[trainjob.OutPhase])
	if !phase.Terminal() {
		return
	}
	class := outs[trainjob.OutFailureClass]
	if class == "" {
		class = NoFailure
	}
	e.steps.WithLabelValues(namespace, string(phase), class).Inc()
	if retry {
		e.retries.WithLabelValues(namespace).Inc()
	}
	if outs[trainjob.OutCacheHit] == "true" {
		e.cacheHits.WithLabelValues(namespace).Inc()
		return
	}
	for _, b := range buckets {
		if v, err := strconv.ParseFloat(outs[b.output], 64); err == nil && v > 0 {
			e.seconds.WithLabelValues(namespace, class, b.label).Add(v)
		}
	}
	if v, err := strconv.ParseFloat(outs[trainjob.OutGPUHours], 64); err == nil && v > 0 {
		e.gpuSeconds.WithLabelValues(namespace, class).Add(v * 3600)
	}
}
