package argo_test

import (
	"testing"

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
	args, err := argotest.Args(wf.Name, ns, string(wf.UID), step("train", "no-resources"))
	require.NoError(t, err)
	r, err := argotest.Execute(t.Context(), h.URL, h.Token, args)
	require.NoError(t, err)
	require.NotNil(t, r.Node, "body: %s", r.Body)
	name, _ := r.Output(trainjob.OutName)
	require.NotEmpty(t, name, r.Node.Message)
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
