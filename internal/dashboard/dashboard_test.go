package dashboard

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`trainstep_steps_ended_total`, []string{"trainstep_steps_ended_total"}},
		{`sum by (namespace, phase) (increase(a_total{namespace=~"$namespace", phase!="x_total"}[$__rate_interval]))`, []string{"a_total"}},
		{`sum(rate(a_total[5m])) by (le) / ignoring(bucket) group_left(face) b_seconds_total offset 1d`, []string{"a_total", "b_seconds_total"}},
		{`histogram_quantile(0.9, sum by (le) (rate(c_seconds_bucket{job='x'}[${interval}])))`, []string{"c_seconds_bucket"}},
		{`a_total and on(namespace) b_total or bool c_total unless d_total`, []string{"a_total", "b_total", "c_total", "d_total"}},
		{`{__name__="named_total", x="y"} * 1e3 + 0.5`, []string{"named_total"}},
		{`sum(a_total) / sum(a_total)`, []string{"a_total"}},
		{`vector(1) + time()`, nil},
		{`label_replace(a_total, "dst", "$1", "src", "(.*)")`, []string{"a_total"}},
	} {
		assert.Equal(t, tc.want, MetricNames(tc.expr), tc.expr)
	}
}

func TestQueriesReadsPanelsRowsAndVariables(t *testing.T) {
	raw := `{"panels": [
	  {"title": "A", "targets": [{"expr": "a_total"}, {"expr": ""}]},
	  {"title": "Row", "type": "row", "panels": [{"title": "B", "targets": [{"expr": "b_total"}]}]}],
	 "templating": {"list": [
	  {"name": "ds", "type": "datasource", "query": "prometheus"},
	  {"name": "ns", "type": "query", "query": {"query": "label_values(c_total{x=\"1\"}, namespace)"}},
	  {"name": "old", "type": "query", "query": "label_values(d_total, face)"}]}}`
	qs, err := Queries([]byte(raw))
	require.NoError(t, err)
	assert.Equal(t, []Query{{"panel A", "a_total"}, {"panel B", "b_total"}, {"variable ns", `c_total{x="1"}`}, {"variable old", "d_total"}}, qs)
}

// Check names the panel and the metric it lacks, and a query that selects nothing.
func TestCheckNamesThePanelAndTheMetric(t *testing.T) {
	raw := `{"panels": [{"title": "GPU-hours", "targets": [{"expr": "sum(gpu_hours_total) / 3600"}]},
	  {"title": "Typo", "targets": [{"expr": "sume(rate(a_total[5m]))"}]},
	  {"title": "Nothing", "targets": [{"expr": "vector(1)"}]}]}`
	served, err := Served(strings.NewReader("# TYPE a_total counter\na_total 1\n"))
	require.NoError(t, err)
	errs := Check([]byte(raw), served)
	require.Len(t, errs, 2)
	assert.ErrorContains(t, errs[0], "panel GPU-hours: metric gpu_hours_total is not served")
	assert.ErrorContains(t, errs[1], `panel Nothing: "vector(1)" selects no metric`)
}

func TestServedNamesAHistogramsSeries(t *testing.T) {
	served, err := Served(strings.NewReader("# TYPE h_seconds histogram\nh_seconds_bucket{le=\"+Inf\"} 1\nh_seconds_sum 2\nh_seconds_count 1\n"))
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{"h_seconds": true, "h_seconds_bucket": true, "h_seconds_sum": true, "h_seconds_count": true}, served)
}
