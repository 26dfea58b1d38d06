package tekton_test

import (
	"encoding/json"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainers"
	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
	"github.com/trainstep/trainstep/test/internal/previous"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// TestUpgradeMidRunAdoptsThePreviousReleasesTrainJob: the controller of the release before 1 Dec
// 2026 started a run's TrainJob, named and labelled as it did (the run's name cut at 28
// characters), and recorded it in the run's status; this release's controller takes the run
// over, finds the job by its identity labels, follows it to the end and reports it: one TrainJob,
// the results name it.
func TestUpgradeMidRunAdoptsThePreviousReleasesTrainJob(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	run := create(t, jaxRun(t, ns, "pipeline-run-x7k2p-train-model", "hold"))
	old := previous.Identity{Engine: tekton.Engine, OwnerUID: string(run.UID), StepKey: run.Name}
	require.NotEqual(t, old.Name(), trainjob.Identity{Engine: tekton.Engine, OwnerUID: string(run.UID), StepKey: run.Name}.Name(),
		"this release names the job differently")

	// What the previous release's controller did: create the job, owned by the run, and record it.
	spec, err := step.Parse([]byte("framework: jax\nlabels: {" + SimMode + ": hold}\ntrainer: {func: \"def train(): pass\"}\n"))
	require.NoError(t, err)
	plan, err := (&trainjob.Planner{Trainers: trainers.Builtin(), Runtimes: runtimes.ClusterSource{Reader: c},
		Detector: &trainjob.APIDetector{Reader: c}}).Plan(t.Context(), spec, ns)
	require.NoError(t, err)
	obj, err := plan.Object(trainjob.Identity{Engine: old.Engine, OwnerUID: old.OwnerUID, StepKey: old.StepKey,
		Owner: &metav1.OwnerReference{APIVersion: v1beta1.GroupVersion.String(), Kind: "CustomRun", Name: run.Name, UID: run.UID,
			Controller: ptr(true), BlockOwnerDeletion: ptr(true)}})
	require.NoError(t, err)
	old.Stamp(obj)
	require.NoError(t, c.Create(t.Context(), obj))
	const before = "written by the previous release"
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := get(t, t.Context(), ns, run.Name)
		now := metav1.Now()
		cur.Status.StartTime = &now
		cur.Status.SetSucceeded(v1beta1.Condition{Status: corev1.ConditionUnknown, Reason: string(trainjob.PhaseRunning), Message: before, LastTransitionTime: now})
		x, err := json.Marshal(map[string]string{"trainJob": old.Name()})
		if err != nil {
			return err
		}
		cur.Status.ExtraFields = runtime.RawExtension{Raw: x}
		return c.Status().Update(t.Context(), cur)
	}))

	startController(t, ns)
	waitRun(t, ns, run.Name, func(ct *assert.CollectT, r *v1beta1.CustomRun) {
		cond := r.Status.Succeeded()
		if assert.NotNil(ct, cond) {
			assert.Equal(ct, corev1.ConditionUnknown, cond.Status)
			assert.NotEqual(ct, before, cond.Message, "this release has observed the run")
		}
	})
	require.Equal(t, []string{old.Name()}, jobNames(testenv.TrainJobs(t.Context(), t, c, ns)), "no second TrainJob")

	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		tj := &trainer.TrainJob{}
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: old.Name()}, tj); err != nil {
			return err
		}
		tj.Labels[SimMode] = "succeed"
		return c.Update(t.Context(), tj)
	}))
	done := waitRun(t, ns, run.Name, succeeded(corev1.ConditionTrue, tekton.ReasonSucceeded))
	name, _ := result(done, trainjob.OutName)
	assert.Equal(t, old.Name(), name)
	phase, _ := result(done, trainjob.OutPhase)
	assert.Equal(t, string(trainjob.PhaseSucceeded), phase)
	assert.Equal(t, []string{old.Name()}, jobNames(testenv.TrainJobs(t.Context(), t, c, ns)), "one TrainJob")
}

func jobNames(tjs []trainer.TrainJob) []string {
	out := make([]string, 0, len(tjs))
	for _, tj := range tjs {
		out = append(out, tj.Name)
	}
	return out
}
