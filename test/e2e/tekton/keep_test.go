package tekton_test

import (
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// TestKeepOnTimeoutOutlivesThePipelineRun: a step with timeout and keepOnTimeout times out under
// Tekton's controller; its TrainJob, still training, is marked kept and has no owner, so deleting
// the PipelineRun (foreground: gone only once the garbage collector has deleted every dependent
// that blocks it, the CustomRun and what the CustomRun owns) leaves it.
func TestKeepOnTimeoutOutlivesThePipelineRun(t *testing.T) {
	t.Parallel()
	dumpOnFailure(t)
	ns := env.Namespace(t)
	pr := pipelineRun(t, ns, `
apiVersion: tekton.dev/v1
kind: PipelineRun
metadata: {name: keep}
spec:
  pipelineSpec:
    tasks:
    - name: train
      taskRef: `+ref+`
      params:
      - {name: framework, value: jax}
      - {name: trainer.func, value: "def train(): pass"}
      - {name: labels.sim-mode, value: hold}
      - {name: timeout, value: 5s}
      - {name: keepOnTimeout, value: "true"}
`)
	waitTrainJob(t, ns)
	waitPR(t, ns, "keep", "False", "Failed")
	reason, _ := customRunReason(t, ns)
	assert.Equal(t, tekton.ReasonTimedOut, reason)
	jobs := testenv.TrainJobs(t.Context(), t, c, ns)
	require.Len(t, jobs, 1)
	name := jobs[0].Name
	assert.True(t, trainjob.Kept(&jobs[0]), "annotations: %v", jobs[0].Annotations)
	assert.Empty(t, jobs[0].OwnerReferences, "a kept job has no owner to be collected with")

	require.NoError(t, c.Delete(t.Context(), pr, client.PropagationPolicy(metav1.DeletePropagationForeground)))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(c.Get(t.Context(), client.ObjectKeyFromObject(pr), pr.DeepCopy()))
	}, e2eTimeout, testenv.Interval, "the PipelineRun must be deleted")
	tj := &trainer.TrainJob{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, tj), "the kept TrainJob stays")
	assert.Nil(t, tj.DeletionTimestamp)
	assert.False(t, trainjob.Observe(tj, nil).Phase.Terminal(), "it still trains")
}
