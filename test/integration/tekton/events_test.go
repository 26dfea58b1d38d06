package tekton_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// The Trainer reports a JobSet it cannot create only as an Event; the CustomRun's running
// message says so (the controller caches Events about TrainJobs and is woken by them).
func TestResourceCreationFailureEventIsReported(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	startController(t, ns)
	create(t, jaxRun(t, ns, "train", "no-resources"))
	tj := oneTrainJob(t, ns)
	testenv.CreateTrainJobEvent(t, c, &tj, trainjob.ReasonResourcesCreationFailed, `admission webhook "vjobset.kb.io" denied the request: will exceed 63 characters`)
	waitRun(t, ns, "train", func(ct *assert.CollectT, run *v1beta1.CustomRun) {
		cond := run.Status.Succeeded()
		if assert.NotNil(ct, cond) {
			assert.Equal(ct, corev1.ConditionUnknown, cond.Status)
			assert.Contains(ct, cond.Message, "the Trainer cannot create its resources")
			assert.Contains(ct, cond.Message, "will exceed 63 characters")
		}
	})
}
