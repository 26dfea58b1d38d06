package tekton

import (
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/core/stepmetrics"
	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/dashboard"
)

// The controller's /metrics serves the step series under the names the Argo janitor serves them
// (face="tekton"), and every query of the Grafana dashboard selects series it serves.
func TestMetricsServeTheStepSeriesTheDashboardQueries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics()
	require.NoError(t, m.register(reg))
	at := func(s int) *time.Time { v := time.Unix(1000+int64(s), 0); return &v }
	trained := trainjob.Observation{Name: "tj", Namespace: "team-a", Phase: trainjob.PhaseSucceeded, StartTime: at(0), CompletionTime: at(60),
		TrainingStart: at(0), NumNodes: 1, Accelerators: 1}
	m.ended.Observe(trained, true)
	m.ended.Observe(trainjob.Observation{Namespace: "team-a", Phase: trainjob.PhaseSucceeded, CacheKey: "k",
		Cached: &trainjob.Cached{From: "tj", Outputs: trained.Outputs()}}, false)

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	served, err := dashboard.Scrape(t.Context(), srv.URL)
	require.NoError(t, err)
	for _, name := range []string{stepmetrics.StepsEnded, stepmetrics.Seconds, stepmetrics.GPUSeconds, stepmetrics.CacheHits, stepmetrics.Retries} {
		assert.True(t, served[name], name)
	}
	assert.Contains(t, gathered(t, reg), `trainstep_step_retries_total{face="tekton",namespace="team-a"} 1`)

	raw, err := os.ReadFile("../../docs/grafana/trainstep.json")
	require.NoError(t, err)
	for _, err := range dashboard.Check(raw, served) {
		assert.NoError(t, err)
	}
}

// gathered is what reg serves, as /metrics text.
func gathered(t *testing.T, reg prometheus.Gatherer) string {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	var b strings.Builder
	for _, f := range families {
		_, err := expfmt.MetricFamilyToText(&b, f)
		require.NoError(t, err)
	}
	return b.String()
}
