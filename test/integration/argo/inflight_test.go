package argo_test

import (
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/lifecycle"
	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/argo"
	"github.com/trainstep/trainstep/test/internal/argotest"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// Two Workflows run the same cached step at once, each with its own sidecar (scoped to its
// Workflow, as in a cluster): the second follows the first's TrainJob, so one trains. Stopping
// the follower's Workflow lets go of the job, which trains on for the first; stopping that one
// too deletes it. (The conformance suite proves the same through the CLI and Tekton faces on
// the real Trainer; its Argo harness runs one agent at a time.)
func TestInFlightStepsOfTwoWorkflowsTrainOnce(t *testing.T) {
	ns := env.Namespace(t)
	first, second := workflow(t, ns), workflow(t, ns)
	sidecars := map[types.UID]*harness{}
	for _, wf := range []*wfv1.Workflow{first, second} {
		sidecars[wf.UID] = startPlugin(t, ns, func(o *argo.Options) { o.HoldMax = 0; o.Workflow = wf.Name })
	}
	call := func(wf *wfv1.Workflow) argotest.Reply {
		h := sidecars[wf.UID]
		args, err := argotest.Args(wf.Name, ns, string(wf.UID), step("train", "hold", "cache: {maxAge: 1h, salt: in-flight}"))
		require.NoError(t, err)
		r, err := argotest.Execute(t.Context(), h.URL, h.Token, args)
		require.NoError(t, err)
		require.NotNil(t, r.Node, "body: %s", r.Body)
		return r
	}
	made := call(first)
	name, _ := made.Output(trainjob.OutName)
	require.NotEmpty(t, name, made.Node.Message)

	var following argotest.Reply
	require.Eventually(t, func() bool {
		following = call(second)
		return strings.Contains(following.Node.Message, "following TrainJob "+name)
	}, testenv.Timeout, testenv.Interval, "the second workflow's step must follow the first's TrainJob")
	followed, _ := following.Output(trainjob.OutName)
	assert.Equal(t, name, followed)
	reason, _ := following.Output(trainjob.OutReason)
	assert.Equal(t, lifecycle.ReasonFollowing, reason)
	assert.False(t, following.Node.Phase.Fulfilled(nil), "the follower waits: %s", following.Node.Phase)
	require.Len(t, testenv.TrainJobs(t.Context(), t, c, ns), 1, "one TrainJob for both")

	stop := func(wf *wfv1.Workflow) {
		cur := &wfv1.Workflow{}
		require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(wf), cur))
		cur.Spec.Shutdown = wfv1.ShutdownStrategyStop
		require.NoError(t, c.Update(t.Context(), cur))
	}
	key := types.NamespacedName{Namespace: ns, Name: name}
	stop(second)
	require.Eventually(t, func() bool {
		tj := &trainer.TrainJob{}
		if c.Get(t.Context(), key, tj) != nil {
			return false
		}
		_, held := tj.Labels[trainjob.HoldKey(string(second.UID))]
		return !held
	}, testenv.Timeout, testenv.Interval, "the stopped workflow's sidecar must let go of the TrainJob")
	tj := &trainer.TrainJob{}
	require.NoError(t, c.Get(t.Context(), key, tj))
	assert.Nil(t, tj.DeletionTimestamp, "it trains on for the first workflow")
	assert.Contains(t, tj.Labels, trainjob.HoldKey(string(first.UID)))
	for _, ref := range tj.OwnerReferences {
		assert.NotEqual(t, second.UID, ref.UID, "no owner reference of the stopped workflow")
	}

	stop(first)
	require.Eventually(t, func() bool { return apierrors.IsNotFound(c.Get(t.Context(), key, &trainer.TrainJob{})) },
		testenv.Timeout, testenv.Interval, "the last holder's stop deletes the TrainJob")
}
