package tekton

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainstep/trainstep/core/stepmetrics"
	"github.com/trainstep/trainstep/core/trainjob"
)

// metrics are the controller's own Prometheus series, next to controller-runtime's
// controller_runtime_reconcile_* (reconciles, errors, durations) on the same /metrics.
type metrics struct {
	reconciles *prometheus.CounterVec
	finished   *prometheus.CounterVec
	notice     prometheus.Histogram
	// ended counts what ended steps cost, by namespace and failure class.
	ended *stepmetrics.Ended

	mu     sync.Mutex
	phases map[types.NamespacedName]trainjob.Phase // the current TrainJob phase of each unfinished run
	gauge  *prometheus.Desc
}

func newMetrics() *metrics {
	return &metrics{
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trainstep_tekton_reconciles_total",
			Help: "CustomRun reconciles by result (ok, error, requeue; stale: skipped until the cache shows the controller's last status write).",
		}, []string{"result"}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trainstep_tekton_customruns_finished_total",
			Help: "CustomRuns trainstep brought to a terminal state, by Succeeded status and reason.",
		}, []string{"status", "reason"}),
		notice: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "trainstep_tekton_completion_notice_seconds",
			Help:    "Time from the TrainJob's terminal condition to the CustomRun's terminal status write (the condition time has 1 s resolution).",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60},
		}),
		ended:  stepmetrics.New(Engine),
		phases: map[types.NamespacedName]trainjob.Phase{},
		gauge: prometheus.NewDesc("trainstep_tekton_trainjobs",
			"TrainJobs of unfinished CustomRuns, by phase.", []string{"phase"}, nil),
	}
}

func (m *metrics) register(r prometheus.Registerer) error {
	for _, c := range append([]prometheus.Collector{m.reconciles, m.finished, m.notice, m}, m.ended.Collectors()...) {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (m *metrics) setPhase(run types.NamespacedName, p trainjob.Phase) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.phases[run] = p
}

func (m *metrics) forget(run types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.phases, run)
}

// Describe implements prometheus.Collector for the phase gauge.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) { ch <- m.gauge }

// Collect implements prometheus.Collector: every phase, zero included, so series do not vanish.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	counts := map[trainjob.Phase]int{}
	for _, p := range m.phases {
		counts[p]++
	}
	m.mu.Unlock()
	for _, p := range []trainjob.Phase{trainjob.PhasePending, trainjob.PhaseSuspended, trainjob.PhaseRunning} {
		ch <- prometheus.MustNewConstMetric(m.gauge, prometheus.GaugeValue, float64(counts[p]), string(p))
	}
}
