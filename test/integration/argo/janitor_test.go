package argo_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/stepmetrics"
	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/dashboard"
	"github.com/trainstep/trainstep/internal/managed"
	"github.com/trainstep/trainstep/plugin/argo"
	"github.com/trainstep/trainstep/test/internal/argotest"
	"github.com/trainstep/trainstep/test/internal/harnessutil"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// startJanitor runs the cluster-level janitor for one namespace until the test ends.
func startJanitor(t *testing.T, ns string) {
	t.Helper()
	mgr, err := argo.NewJanitor(env.Config, managed.Options{Name: argo.JanitorName, Namespaces: []string{ns}, MetricsAddr: "0", ProbeAddr: "0"}, prometheus.NewRegistry())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
}

// The agent pod dies (evicted, its node lost) or the plugin sidecar does: the plugin and its
// reaper go with it, and Argo fails the plugin's node while the workflow runs on; under a
// retryStrategy Argo starts the next attempt. The nodes are as Argo v3.7.3 records them: the
// step's {{node.name}} (the key) names the Retry parent, which stays Running, and attempt N
// ({{retries}}) is its child key(N). The janitor, which outlives every agent, deletes the failed
// attempt's TrainJob and leaves the running attempt's and those of a node that still runs.
func TestJanitorDeletesTheTrainJobOfAFinishedNode(t *testing.T) {
	ns := env.Namespace(t)
	h := startPlugin(t, ns, func(o *argo.Options) { o.HoldMax = 0 })
	wf := workflow(t, ns)
	calls := []struct {
		name, key string
		attempt   int
		retry     bool
	}{
		{"lost attempt", "wf.lost", 0, true},
		{"next attempt", "wf.lost", 1, true},
		{"alive", "wf.alive", 0, false},
	}
	names := map[string]string{}
	for _, call := range calls {
		var opts []func(*wfv1.Template)
		body := step(call.key, "hold")
		if call.retry {
			opts = append(opts, argotest.WithRetry(1))
			body = step(call.key, "hold", fmt.Sprintf("attempt: %q", strconv.Itoa(call.attempt)))
		}
		args, err := argotest.Args(wf.Name, ns, string(wf.UID), body, opts...)
		require.NoError(t, err)
		r, err := argotest.Execute(t.Context(), h.URL, h.Token, args)
		require.NoError(t, err)
		require.NotNil(t, r.Node, "body: %s", r.Body)
		names[call.name], _ = r.Output(trainjob.OutName)
		require.NotEmpty(t, names[call.name], r.Node.Message)
	}
	h.stop() // the agent pod is gone, and the plugin's reaper with it

	cur := &wfv1.Workflow{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(wf), cur))
	cur.Status.Phase = wfv1.WorkflowRunning
	cur.Status.Nodes = wfv1.Nodes{
		"wf-1":  {ID: "wf-1", Name: "wf.lost", Type: wfv1.NodeTypeRetry, Phase: wfv1.NodeRunning, Children: []string{"wf-10", "wf-11"}},
		"wf-10": {ID: "wf-10", Name: "wf.lost(0)", Type: wfv1.NodeTypePlugin, Phase: wfv1.NodeFailed, Message: "connection refused"},
		"wf-11": {ID: "wf-11", Name: "wf.lost(1)", Type: wfv1.NodeTypePlugin, Phase: wfv1.NodeRunning},
		"wf-2":  {ID: "wf-2", Name: "wf.alive", Type: wfv1.NodeTypePlugin, Phase: wfv1.NodeRunning},
	}
	require.NoError(t, c.Update(t.Context(), cur))
	startJanitor(t, ns)

	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: names["lost attempt"]}, &trainer.TrainJob{}))
	}, testenv.Timeout, testenv.Interval, "the TrainJob of the failed attempt must be deleted")
	for _, stays := range []string{"next attempt", "alive"} {
		tj := &trainer.TrainJob{}
		require.NoError(t, c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: names[stays]}, tj), "the TrainJob of a running node stays: %s", stays)
		assert.Nil(t, tj.DeletionTimestamp, stays)
	}

	// And once the workflow is stopped, the rest goes too (no reaper runs: the agent is gone).
	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(wf), cur))
	cur.Spec.Shutdown = wfv1.ShutdownStrategyStop
	require.NoError(t, c.Update(t.Context(), cur))
	require.Eventually(t, func() bool { return len(testenv.TrainJobs(t.Context(), t, c, ns)) == 0 },
		testenv.Timeout, testenv.Interval, "a stopped workflow's TrainJobs must be deleted")
	assert.Empty(t, testenv.TrainJobs(t.Context(), t, c, ns))
}

// A step that timed out with keepOnTimeout keeps its TrainJob: the plugin marks it kept and
// drops the Workflow's owner reference; then neither the janitor (its node is finished) nor the
// plugin's reaper (its workflow completes) deletes it, and it trains on.
func TestKeptTrainJobOutlivesItsNodeAndWorkflow(t *testing.T) {
	ns := env.Namespace(t)
	h := startPlugin(t, ns, func(o *argo.Options) { o.HoldMax = 0 })
	startJanitor(t, ns)
	wf := workflow(t, ns)
	args, err := argotest.Args(wf.Name, ns, string(wf.UID), step("wf.keep", "hold", "timeout: 2s", "keepOnTimeout: true"))
	require.NoError(t, err)
	var name string
	require.Eventually(t, func() bool {
		r, err := argotest.Execute(t.Context(), h.URL, h.Token, args)
		if err != nil || r.Node == nil {
			return false
		}
		name, _ = r.Output(trainjob.OutName)
		return r.Node.Phase == wfv1.NodeFailed
	}, testenv.Timeout, testenv.Interval, "the step must time out")
	tj := &trainer.TrainJob{}
	require.NoError(t, c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, tj))
	assert.True(t, trainjob.Kept(tj), "annotations: %v", tj.Annotations)
	assert.Empty(t, tj.OwnerReferences, "the Workflow's garbage collection must not take a kept job")

	// Argo records the node failed and the workflow completes.
	cur := &wfv1.Workflow{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(wf), cur))
	cur.Status.Nodes = wfv1.Nodes{"wf-1": {ID: "wf-1", Name: "wf.keep", Type: wfv1.NodeTypePlugin, Phase: wfv1.NodeFailed, Message: "timed out"}}
	require.NoError(t, c.Update(t.Context(), cur))
	cur.Status.Phase = wfv1.WorkflowFailed
	cur.Labels = map[string]string{argo.LabelCompleted: "true"}
	require.NoError(t, c.Update(t.Context(), cur))
	require.NoError(t, h.Plugin.Sweep(t.Context()), "the reaper's sweep on SIGTERM")

	// The janitor and the reaper have seen the completed workflow when a TrainJob created after
	// it, of a step not kept, is gone; the kept one is still there.
	other := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-x",
		Labels: tj.Labels, Annotations: map[string]string{trainjob.AnnotationStepKey: "wf.other"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: wfv1.SchemeGroupVersion.String(), Kind: "Workflow", Name: cur.Name, UID: cur.UID}},
	}, Spec: tj.Spec}
	require.NoError(t, c.Create(t.Context(), other))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(c.Get(t.Context(), client.ObjectKeyFromObject(other), &trainer.TrainJob{}))
	}, testenv.Timeout, testenv.Interval, "the janitor must have deleted the unkept job of the completed workflow")
	require.NoError(t, c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, tj), "the kept TrainJob stays")
	assert.Nil(t, tj.DeletionTimestamp)
}

// The janitor, not the agent pod, serves the steps that ended: it counts each from its node as
// Argo records the plugin's reply, and its real /metrics (controller-runtime's server, on the
// registry it serves) carries every series the Grafana dashboard queries. A janitor counts only
// the steps that end once it leads (docs/cost.md), so the test adds ended nodes until one is
// counted.
func TestJanitorServesTheStepsThatEndedOnItsMetrics(t *testing.T) {
	ns := env.Namespace(t)
	h := startPlugin(t, ns, nil)
	wf := workflow(t, ns)
	args, err := argotest.Args(wf.Name, ns, string(wf.UID), step("train", "fail"))
	require.NoError(t, err)
	r := callUntil(t, h, args)
	require.Equal(t, wfv1.NodeFailed, r.Node.Phase)
	class, _ := r.Output(trainjob.OutFailureClass)
	require.NotEmpty(t, class)

	metricsAddr := harnessutil.FreeAddr(t)
	mgr, err := argo.NewJanitor(env.Config, managed.Options{Name: argo.JanitorName, Namespaces: []string{ns}, MetricsAddr: metricsAddr, ProbeAddr: "0"}, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})

	series := fmt.Sprintf(`trainstep_steps_ended_total{face="argo",failure_class=%q,namespace=%q,phase="Failed"}`, class, ns)
	var body string
	nodes := 0
	require.Eventually(t, func() bool {
		if body, err = httpGet("http://" + metricsAddr + "/metrics"); err == nil && strings.Contains(body, series) {
			return true
		}
		// Not counted yet: the step ended before the janitor led. Another ends now.
		cur := &wfv1.Workflow{}
		require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(wf), cur))
		if cur.Status.Nodes == nil {
			cur.Status.Nodes = wfv1.Nodes{}
		}
		id := fmt.Sprintf("wf-%d", nodes)
		nodes++
		cur.Status.Nodes[id] = wfv1.NodeStatus{ID: id, Name: fmt.Sprintf("wf[%d].train", nodes), Type: wfv1.NodeTypePlugin, Phase: r.Node.Phase, Outputs: r.Node.Outputs}
		require.NoError(t, c.Update(t.Context(), cur))
		return false
	}, testenv.Timeout, testenv.Interval, "no step that ended was counted: %s", body)
	served, err := dashboard.ServedText([]byte(body))
	require.NoError(t, err)
	assert.True(t, served["controller_runtime_reconcile_total"], "controller-runtime's own series, beside the janitor's")
	raw, err := os.ReadFile("../../../docs/grafana/trainstep.json")
	require.NoError(t, err)
	// A step that failed at once alone: no whole second in any bucket, no GPU seconds, cache hit
	// or retry, whose series appear once such a step ends (plugin/argo's
	// TestDashboardQueriesWhatTheJanitorServes has them all).
	absent := []string{stepmetrics.Seconds, stepmetrics.GPUSeconds, stepmetrics.CacheHits, stepmetrics.Retries}
	for _, err := range dashboard.Check(raw, served) {
		assert.True(t, slices.ContainsFunc(absent, func(n string) bool { return strings.Contains(err.Error(), "metric "+n+" ") }), err.Error())
	}
}
