package argo

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics live in the plugin's own registry (no global state). They say how the sidecar serves
// its calls; what the steps that ended cost is counted by the janitor (tally.go), which outlives
// the agent pod these die with.
type metrics struct {
	registry *prometheus.Registry
	calls    *prometheus.CounterVec
	notice   prometheus.Histogram
	hold     prometheus.Histogram
	held     prometheus.Gauge
	holdFull prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trainstep_argo_execute_calls_total",
			Help: "template.execute calls by outcome: the reply's node phase (Pending, Running, Succeeded, Failed), invalid, foreign, forbidden, bad_request or too_large.",
		}, []string{"outcome"}),
		notice: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "trainstep_argo_completion_notice_seconds",
			Help:    "From a TrainJob's terminal condition (second resolution) to the terminal reply.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60},
		}),
		hold: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "trainstep_argo_execute_duration_seconds",
			Help:    "How long execute calls were held open.",
			Buckets: []float64{0.001, 0.01, 0.1, 0.5, 1, 5, 10, 20, 25},
		}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "trainstep_argo_held_calls",
			Help: "Calls held open now, waiting for a TrainJob to finish.",
		}),
		holdFull: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "trainstep_argo_hold_refused_total",
			Help: "Calls answered at once because maxHeld calls were already held.",
		}),
	}
	m.registry.MustRegister(m.calls, m.notice, m.hold, m.held, m.holdFull,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
