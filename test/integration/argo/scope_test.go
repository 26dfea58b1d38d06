package argo_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/argo"
	"github.com/trainstep/trainstep/test/internal/argotest"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// TestSidecarCachesOnlyItsWorkflowsTrainJobs: with --workflow (the agent pod's
// $ARGO_WORKFLOW_NAME), the sidecar's informer cache holds its own workflow's TrainJob and its
// pods (labelled through spec.runtimePatches), not the TrainJob and pods another workflow of the
// namespace made earlier; without it, it holds both.
func TestSidecarCachesOnlyItsWorkflowsTrainJobs(t *testing.T) {
	ns := env.Namespace(t)
	mine, other := workflow(t, ns), workflow(t, ns)
	unscoped := startPlugin(t, ns, func(o *argo.Options) { o.HoldMax = 0 })
	submitFor := func(h *harness, wfName, uid string) string {
		args, err := argotest.Args(wfName, ns, uid, step("train", "hold"))
		require.NoError(t, err)
		r, err := argotest.Execute(t.Context(), h.URL, h.Token, args)
		require.NoError(t, err)
		require.NotNil(t, r.Node, "body: %s", r.Body)
		name, _ := r.Output(trainjob.OutName)
		require.NotEmpty(t, name)
		return name
	}
	otherJob := submitFor(unscoped, other.Name, string(other.UID))
	// The other workflow's TrainJob exists before the scoped sidecar starts, so an unscoped
	// first LIST would have cached it.
	scoped := startPlugin(t, ns, func(o *argo.Options) { o.HoldMax = 0; o.Workflow = mine.Name })
	myJob := submitFor(scoped, mine.Name, string(mine.UID))
	require.NotEqual(t, otherJob, myJob)

	require.Eventually(t, func() bool { return metric(t, unscoped, "trainstep_argo_cached_trainjobs") == "2" },
		testenv.Timeout, testenv.Interval, "the unscoped sidecar holds both workflows' TrainJobs")
	require.Eventually(t, func() bool { return metric(t, scoped, "trainstep_argo_cached_trainjobs") == "1" },
		testenv.Timeout, testenv.Interval, "the scoped sidecar holds its own TrainJob")
	// Both TrainJobs are in the apiserver, and the scoped sidecar still holds only its own.
	l := &trainer.TrainJobList{}
	require.NoError(t, c.List(t.Context(), l, client.InNamespace(ns)))
	require.Len(t, l.Items, 2)
	require.Equal(t, "1", metric(t, scoped, "trainstep_argo_cached_trainjobs"))
	podsOf := func(job string) int {
		pods := &corev1.PodList{}
		require.NoError(t, c.List(t.Context(), pods, client.InNamespace(ns), client.MatchingLabels{trainjob.LabelJobSetName: job}))
		return len(pods.Items)
	}
	require.Eventually(t, func() bool { return podsOf(myJob) > 0 && podsOf(otherJob) > 0 }, testenv.Timeout, testenv.Interval)
	require.Eventually(t, func() bool {
		return metric(t, unscoped, "trainstep_argo_cached_pods") == strconv.Itoa(podsOf(myJob)+podsOf(otherJob))
	}, testenv.Timeout, testenv.Interval, "the unscoped sidecar holds both workflows' pods")
	require.Eventually(t, func() bool { return metric(t, scoped, "trainstep_argo_cached_pods") == strconv.Itoa(podsOf(myJob)) },
		testenv.Timeout, testenv.Interval, "the scoped sidecar holds its own TrainJob's pods only")
	// Its own step is answered as before.
	args, err := argotest.Args(mine.Name, ns, string(mine.UID), step("train", "hold"))
	require.NoError(t, err)
	r, err := argotest.Execute(t.Context(), scoped.URL, scoped.Token, args)
	require.NoError(t, err)
	require.NotNil(t, r.Node, "body: %s", r.Body)
	name, _ := r.Output(trainjob.OutName)
	require.Equal(t, myJob, name)
}

// TestSidecarNeedsItsWorkflow: a sidecar named after a workflow that does not exist fails at
// start, naming the flag, instead of silently caching nothing.
func TestSidecarNeedsItsWorkflow(t *testing.T) {
	ns := env.Namespace(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("t"), 0o440))
	_, err := argo.New(env.Config, argo.Options{Namespace: ns, Workflow: "no-such-workflow", TokenFile: tokenFile})
	require.ErrorContains(t, err, "--workflow")
}
