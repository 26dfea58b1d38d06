package tektonrbac_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/test/internal/tektonharness"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

const pipeline = `
apiVersion: tekton.dev/v1
kind: PipelineRun
metadata: {name: run}
spec:
  pipelineSpec:
    tasks:
    - name: train
      taskRef: ` + tektonharness.Ref + `
      params:
      - {name: framework, value: jax}
      - {name: trainer.func, value: "def train(): pass"}
      - {name: labels.sim-mode, value: succeed}
`

// startController runs trainstep's Tekton controller as a user holding manifests/tekton's rules
// less those drop selects, limited to ns, until the test ends.
func startController(t *testing.T, ns string, drop func(rbacv1.PolicyRule) bool) {
	t.Helper()
	user := "trainstep-tekton-" + ns
	tektonharness.GrantManifestRBAC(t, bed.Client, ns, user, drop)
	cfg, err := bed.Env.UserConfig(user)
	require.NoError(t, err)
	mgr, err := tekton.New(cfg, tekton.Options{MetricsAddr: "0", ProbeAddr: "0", Namespaces: []string{ns},
		Logs: bed.Sim.Logs, Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err, "the controller stopped with an error")
		case <-time.After(testenv.Timeout):
			t.Error("the controller did not stop")
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Tekton controller log (end):\n%s", bed.Tekton.LogTail(8000))
		}
	})
}

// With exactly the manifests' rules a Pipeline's trainstep task runs to completion.
func TestManifestRBACRunsThePipeline(t *testing.T) {
	t.Parallel()
	ns := bed.Env.Namespace(t)
	startController(t, ns, nil)
	tektonharness.CreatePipelineRun(t, bed.Client, ns, pipeline)
	tektonharness.WaitPipelineRun(t, bed.Client, ns, "run", "True", "Succeeded", 3*testenv.Timeout)
}

// Upgraded without this release's RBAC (no get on the TrainJob CRD, which says which Trainer is
// installed), the controller cannot plan: the CustomRun fails at once with the forbidden read and
// the fix, and so does the PipelineRun, instead of "planning the TrainJob" until a timeout with
// the cause only in the controller's log.
func TestMissingRBACRuleFailsThePipelineWithTheFix(t *testing.T) {
	t.Parallel()
	ns := bed.Env.Namespace(t)
	startController(t, ns, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "customresourcedefinitions") })
	tektonharness.CreatePipelineRun(t, bed.Client, ns, pipeline)
	tektonharness.WaitPipelineRun(t, bed.Client, ns, "run", "False", "Failed", 3*testenv.Timeout)
	runs := tektonharness.CustomRuns(t, t, bed.Client, ns)
	require.Len(t, runs, 1)
	cond := runs[0].Status.Succeeded()
	require.NotNil(t, cond)
	assert.Equal(t, tekton.ReasonPlanningForbidden, cond.Reason)
	assert.Contains(t, cond.Message, `cannot get resource "customresourcedefinitions"`)
	assert.Contains(t, cond.Message, "manifests/tekton/rbac.yaml")
	assert.Empty(t, testenv.TrainJobs(t.Context(), t, bed.Client, ns))
}
