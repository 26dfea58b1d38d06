package argo_test

import (
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/argo"
	"github.com/trainstep/trainstep/test/internal/argotest"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// The Trainer reports a JobSet it cannot create only as an Event; the Argo node's message says
// so while the step waits (the plugin caches Events about TrainJobs).
func TestResourceCreationFailureEventIsReported(t *testing.T) {
	ns := env.Namespace(t)
	h := startPlugin(t, ns, func(o *argo.Options) { o.HoldMax = 0 })
	wf := workflow(t, ns)
	args, name := startStep(t, h, wf, "no-resources")
	tj := &trainer.TrainJob{}
	require.NoError(t, c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, tj))
	testenv.CreateTrainJobEvent(t, c, tj, trainjob.ReasonResourcesCreationFailed, `admission webhook "vjobset.kb.io" denied the request: will exceed 63 characters`)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		r, err := argotest.Execute(t.Context(), h.URL, h.Token, args)
		if assert.NoError(ct, err) && assert.NotNil(ct, r.Node) {
			assert.Contains(ct, r.Node.Message, "the Trainer cannot create its resources")
			assert.Contains(ct, r.Node.Message, "will exceed 63 characters")
		}
	}, testenv.Timeout, testenv.Interval)
}

// Why a job does not start is said in the Events of what its TrainJob owns: a Job's FailedCreate
// (here a quota) is in the node's message while it waits, and JobSet's JobCreationFailed for an
// invalid Job fails the node at once and deletes the TrainJob (the plugin caches the namespace's
// Warning Events and matches them to the TrainJob by name).
func TestOwnedObjectsEventsAreReported(t *testing.T) {
	ns := env.Namespace(t)
	h := startPlugin(t, ns, func(o *argo.Options) { o.HoldMax = 0 })
	wf := workflow(t, ns)
	args, name := startStep(t, h, wf, "no-resources")

	job := name + "-node-0"
	testenv.CreateOwnedEvent(t, c, ns, "Job", job, trainjob.ReasonFailedCreate,
		`Error creating: pods "`+job+`-1-abcde" is forbidden: exceeded quota: one-pod, requested: pods=1, used: pods=1, limited: pods=1`)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		r, err := argotest.Execute(t.Context(), h.URL, h.Token, args)
		if assert.NoError(ct, err) && assert.NotNil(ct, r.Node) {
			assert.Equal(ct, wfv1.NodePending, r.Node.Phase, "still waiting")
			assert.Contains(ct, r.Node.Message, "Job "+job+" cannot create pods: Error creating")
			assert.Contains(ct, r.Node.Message, "exceeded quota: one-pod")
		}
	}, testenv.Timeout, testenv.Interval)

	testenv.CreateOwnedEvent(t, c, ns, "JobSet", name, trainjob.ReasonJobCreationFailed,
		`job "`+job+`" creation failed with error: Job.batch "`+job+`" is invalid: spec.template.spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "500m": must be an integer`)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		r, err := argotest.Execute(t.Context(), h.URL, h.Token, args)
		if assert.NoError(ct, err) && assert.NotNil(ct, r.Node) {
			assert.Equal(ct, wfv1.NodeFailed, r.Node.Phase)
			assert.Contains(ct, r.Node.Message, "refuses its Job "+job+" as invalid")
			assert.Contains(ct, r.Node.Message, "must be an integer")
		}
	}, testenv.Timeout, testenv.Interval)
	require.Eventually(t, func() bool { return len(testenv.TrainJobs(t.Context(), t, c, ns)) == 0 },
		testenv.Timeout, testenv.Interval, "the TrainJob must be deleted")
}
