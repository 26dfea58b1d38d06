package tekton_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/stepmetrics"
	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/test/internal/harnessutil"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// As a Deployment runs it: leader election (a Lease), /healthz and /readyz, and /metrics with
// the controller's own series.
func TestOperations(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	probe, metricsAddr := harnessutil.FreeAddr(t), harnessutil.FreeAddr(t)
	ctl := startController(t, ns, func(o *tekton.Options) {
		o.LeaderElection, o.LeaderElectionNamespace = true, ns
		o.ProbeAddr, o.MetricsAddr = probe, metricsAddr
	})
	create(t, jaxRun(t, ns, "train", "succeed"))
	waitRun(t, ns, "train", succeeded(corev1.ConditionTrue, ""))

	lease := &coordinationv1.Lease{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: tekton.Name}, lease))
	assert.NotEmpty(t, lease.Spec.HolderIdentity)

	for _, path := range []string{"/healthz", "/readyz"} {
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			res, err := http.Get(fmt.Sprintf("http://%s%s", probe, path))
			if !assert.NoError(ct, err) {
				return
			}
			defer res.Body.Close()
			assert.Equal(ct, http.StatusOK, res.StatusCode, path)
		}, testenv.Timeout, testenv.Interval)
	}
	res, err := http.Get(fmt.Sprintf("http://%s/metrics", metricsAddr))
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	// controller-runtime's reconcile counters for this controller are served too.
	assert.Contains(t, string(body), `controller_runtime_reconcile_total{controller="`+tekton.Name+`"`)

	// The controller's own series (registered on the registry the test passed in).
	assert.Positive(t, counterSum(t, ctl, "trainstep_tekton_reconciles_total"))
	n, err := testutil.GatherAndCount(ctl.Metrics, "trainstep_tekton_customruns_finished_total",
		"trainstep_tekton_completion_notice_seconds", "trainstep_tekton_trainjobs")
	require.NoError(t, err)
	assert.GreaterOrEqual(t, n, 5, "finished + notice histogram + 3 phase gauges")
	// Every finished run is an ended step, counted by namespace and failure class.
	assert.Equal(t, counterSum(t, ctl, "trainstep_tekton_customruns_finished_total"), counterSum(t, ctl, stepmetrics.StepsEnded))
}

func counterSum(t *testing.T, ctl *controller, name string) float64 {
	t.Helper()
	mfs, err := ctl.Metrics.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			sum := 0.0
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			return sum
		}
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}
