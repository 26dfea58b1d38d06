package argo

import (
	"net/http/httptest"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"

	"github.com/trainstep/trainstep/internal/dashboard"
)

// Every query of the Grafana dashboard the repository ships selects series the janitor serves:
// its /metrics, scraped over HTTP once it has counted one step of each kind, parsed as
// Prometheus parses it.
func TestDashboardQueriesWhatTheJanitorServes(t *testing.T) {
	j, c, reg := testJanitor(t)
	require.NoError(t, j.tally.baseline(t.Context(), c))
	require.NoError(t, c.Create(t.Context(), cached(t, endedWorkflow("uid-1", wfv1.WorkflowSucceeded))))
	reconcileWorkflow(t, j, "wf")

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	served, err := dashboard.Scrape(t.Context(), srv.URL)
	require.NoError(t, err)

	raw, err := os.ReadFile("../../docs/grafana/trainstep.json")
	require.NoError(t, err)
	for _, err := range dashboard.Check(raw, served) {
		assert.NoError(t, err)
	}
}
