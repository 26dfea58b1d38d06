package argo_test

import (
	"context"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/managed"
	"github.com/trainstep/trainstep/plugin/argo"
	"github.com/trainstep/trainstep/test/internal/argotest"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// startJanitor runs the cluster-level janitor for one namespace until the test ends.
func startJanitor(t *testing.T, ns string) {
	t.Helper()
	mgr, err := argo.NewJanitor(env.Config, managed.Options{Name: argo.JanitorName, Namespaces: []string{ns}, MetricsAddr: "0", ProbeAddr: "0"})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
}

// The agent pod dies (evicted, its node lost): the plugin and its reaper go with it, and Argo
// fails the plugin's node, while the workflow runs on (a retryStrategy would start the next
// attempt). The janitor, which outlives every agent, deletes that node's TrainJob and leaves
// the TrainJob of a node that still runs.
func TestJanitorDeletesTheTrainJobOfAFinishedNode(t *testing.T) {
	ns := env.Namespace(t)
	h := startPlugin(t, ns, func(o *argo.Options) { o.HoldMax = 0 })
	wf := workflow(t, ns)
	names := map[string]string{}
	for _, key := range []string{"wf.lost(0)", "wf.alive"} {
		args, err := argotest.Args(wf.Name, ns, string(wf.UID), step(key, "hold"))
		require.NoError(t, err)
		r, err := argotest.Execute(t.Context(), h.URL, h.Token, args)
		require.NoError(t, err)
		require.NotNil(t, r.Node, "body: %s", r.Body)
		names[key], _ = r.Output(trainjob.OutName)
		require.NotEmpty(t, names[key], r.Node.Message)
	}
	h.stop() // the agent pod is gone, and the plugin's reaper with it

	cur := &wfv1.Workflow{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(wf), cur))
	cur.Status.Phase = wfv1.WorkflowRunning
	cur.Status.Nodes = wfv1.Nodes{
		"wf-1": {ID: "wf-1", Name: "wf.lost(0)", Type: wfv1.NodeTypePlugin, Phase: wfv1.NodeFailed, Message: "agent pod deleted"},
		"wf-2": {ID: "wf-2", Name: "wf.alive", Type: wfv1.NodeTypePlugin, Phase: wfv1.NodeRunning},
	}
	require.NoError(t, c.Update(t.Context(), cur))
	startJanitor(t, ns)

	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: names["wf.lost(0)"]}, &trainer.TrainJob{}))
	}, testenv.Timeout, testenv.Interval, "the TrainJob of the failed node must be deleted")
	require.NoError(t, c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: names["wf.alive"]}, &trainer.TrainJob{}),
		"the TrainJob of a running node stays")

	// And once the workflow is stopped, the rest goes too (no reaper runs: the agent is gone).
	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(wf), cur))
	cur.Spec.Shutdown = wfv1.ShutdownStrategyStop
	require.NoError(t, c.Update(t.Context(), cur))
	require.Eventually(t, func() bool { return len(testenv.TrainJobs(t.Context(), t, c, ns)) == 0 },
		testenv.Timeout, testenv.Interval, "a stopped workflow's TrainJobs must be deleted")
	assert.Empty(t, testenv.TrainJobs(t.Context(), t, c, ns))
}
