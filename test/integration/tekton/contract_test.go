package tekton_test

import (
	"encoding/json"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/stepmetrics"
	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
	"github.com/trainstep/trainstep/test/internal/testenv"
	"github.com/trainstep/trainstep/test/internal/trainersim"
)

// A real run: the xgboost function runs on two simulated nodes (python, locally), and every
// output arrives as a result in the same update as Succeeded=True.
func TestSucceedsWithEveryOutput(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	startController(t, ns)
	create(t, customRun(t, ns, `
metadata: {name: train}
spec:
  `+ours+`
  params:
  - name: step
    value: |
      framework: xgboost
      trainer:
        func: |
          def train(epochs):
              import os
              print(f"worker {os.environ['DMLC_TASK_ID']} trained {epochs} epochs")
              return {"epochs": epochs, "model_uri": "s3://bucket/model"}
  - {name: trainer.numNodes, value: "2"}
  - {name: trainer.funcArgs, value: {epochs: "3"}}
`))
	run := waitRun(t, ns, "train", succeeded(corev1.ConditionTrue, tekton.ReasonSucceeded))
	require.NotNil(t, run.Status.CompletionTime)
	names := map[string]bool{}
	for _, r := range run.Status.Results {
		names[r.Name] = true
	}
	for _, n := range trainjob.OutputNames {
		assert.True(t, names[n], "result %s missing", n)
	}
	tjs := testenv.TrainJobs(t.Context(), t, c, ns)
	require.Len(t, tjs, 1)
	v, _ := result(run, trainjob.OutName)
	assert.Equal(t, tjs[0].Name, v)
	v, _ = result(run, trainjob.OutNumNodes)
	assert.Equal(t, "2", v)
	v, _ = result(run, trainjob.OutPhase)
	assert.Equal(t, "Succeeded", v)
	v, _ = result(run, trainjob.OutFramework)
	assert.Equal(t, "xgboost", v)
	v, _ = result(run, trainjob.OutResult)
	assert.JSONEq(t, `{"epochs": 3, "model_uri": "s3://bucket/model"}`, v, "rank 0's return value")
	v, _ = result(run, "result-model_uri")
	assert.Equal(t, "s3://bucket/model", v)

	// The TrainJob is controlled by the CustomRun, so deleting the PipelineRun removes it.
	ref := metav1.GetControllerOf(&tjs[0])
	require.NotNil(t, ref, "TrainJob has no controller owner reference")
	assert.Equal(t, "CustomRun", ref.Kind)
	assert.Equal(t, "tekton.dev/v1beta1", ref.APIVersion)
	assert.Equal(t, run.UID, ref.UID)

	// One Event on the CustomRun, the finish: the status names the TrainJob from the start, and
	// every Event is a request per step.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		evs := &eventsv1.EventList{}
		require.NoError(ct, c.List(t.Context(), evs, client.InNamespace(ns)))
		var reasons []string
		for _, e := range evs.Items {
			if e.Regarding.Name == "train" && e.Regarding.Kind == "CustomRun" {
				reasons = append(reasons, e.Reason)
			}
		}
		assert.Equal(ct, []string{tekton.ReasonSucceeded}, reasons)
	}, testenv.Timeout, testenv.Interval)
}

// While the job runs the run says so, Unknown with the core's phase and node count; then the
// results come with True in one update (no status ever has True without results).
func TestProgressThenSuccess(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	startController(t, ns)
	create(t, jaxRun(t, ns, "train", "hold", "timeout: 0s"))
	waitRun(t, ns, "train", func(ct *assert.CollectT, run *v1beta1.CustomRun) {
		succeeded(corev1.ConditionUnknown, "Running")(ct, run)
		if cond := run.Status.Succeeded(); cond != nil {
			assert.Contains(ct, cond.Message, "1/1 nodes")
		}
		assert.Empty(ct, run.Status.Results)
		assert.NotNil(ct, run.Status.StartTime)
	})
	tj := oneTrainJob(t, ns)
	// The Trainer (v2.2+) reports a percentage: the running message carries it.
	pct := int32(40)
	tj.Status.TrainerStatus = &trainer.TrainerStatus{ProgressPercentage: &pct, LastUpdatedTime: metav1.Now()}
	require.NoError(t, c.Status().Update(t.Context(), &tj))
	waitRun(t, ns, "train", func(ct *assert.CollectT, run *v1beta1.CustomRun) {
		succeeded(corev1.ConditionUnknown, "Running")(ct, run)
		if cond := run.Status.Succeeded(); cond != nil {
			assert.Contains(ct, cond.Message, "1/1 nodes · 40%")
		}
	})
	require.NoError(t, sim.Finish(t.Context(), ns, tj.Name, trainersim.Behavior{Mode: trainersim.Succeed}))
	run := waitRun(t, ns, "train", succeeded(corev1.ConditionTrue, ""))
	assert.Len(t, run.Status.Results, len(trainjob.OutputNames))
}

func indent(s string) string {
	out := ""
	for i, l := range splitLines(s) {
		if i > 0 {
			out += "\n  "
		}
		out += l
	}
	return out
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := range len(s) {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func TestFailureCarriesTheLogTail(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	startController(t, ns)
	create(t, jaxRun(t, ns, "train", "fail"))
	run := waitRun(t, ns, "train", succeeded(corev1.ConditionFalse, "FailedJobs"))
	msg := run.Status.Succeeded().Message
	assert.Contains(t, msg, "RuntimeError: CUDA out of memory")
	assert.Contains(t, msg, "last lines of")
	assert.NotNil(t, run.Status.CompletionTime)
	assert.Empty(t, run.Status.RetriesStatus)
}

func TestCancelDeletesTheTrainJob(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	startController(t, ns)
	run := create(t, jaxRun(t, ns, "train", "hold"))
	oneTrainJob(t, ns)
	patchSpec(t, run, cancelPatch)
	run = waitRun(t, ns, "train", succeeded(corev1.ConditionFalse, "CustomRunCancelled"))
	assert.Contains(t, run.Status.Succeeded().Message, v1beta1.CancelledByPipelineMsg)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Empty(ct, testenv.TrainJobs(t.Context(), ct, c, ns))
	}, testenv.Timeout, testenv.Interval)
}

func TestTimeoutDeletesTheTrainJob(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	startController(t, ns)
	create(t, jaxRun(t, ns, "train", "hold", "timeout: 3s"))
	oneTrainJob(t, ns)
	run := waitRun(t, ns, "train", succeeded(corev1.ConditionFalse, "CustomRunTimedOut"))
	assert.Contains(t, run.Status.Succeeded().Message, "timed out after 3s")
	assert.Empty(t, testenv.TrainJobs(t.Context(), t, c, ns))
}

// A TrainJob deleted while the controller was away, whose attempt timed out meanwhile, is not
// reported "kept" (keepOnTimeout) or "deleted" by trainstep: the run says someone deleted it.
func TestTimeoutAfterTheTrainJobWasDeletedSaysSo(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	first := startController(t, ns)
	run := jaxRun(t, ns, "train", "hold")
	for name, v := range map[string]string{"timeout": "1h", "keepOnTimeout": "true"} {
		run.Spec.Params = append(run.Spec.Params, v1beta1.Param{Name: name, Value: v1beta1.ParamValue{Type: v1beta1.ParamTypeString, StringVal: v}})
	}
	create(t, run)
	waitRun(t, ns, "train", succeeded(corev1.ConditionUnknown, "Running"))
	tj := oneTrainJob(t, ns)
	first.Stop()
	require.NoError(t, c.Delete(t.Context(), &tj))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Empty(ct, testenv.TrainJobs(t.Context(), ct, c, ns))
	}, testenv.Timeout, testenv.Interval)

	// The controller comes back two hours later: the attempt's hour has passed.
	later := clocktesting.NewFakePassiveClock(time.Now().Add(2 * time.Hour))
	startController(t, ns, func(o *tekton.Options) { o.Clock = later })
	run = waitRun(t, ns, "train", succeeded(corev1.ConditionFalse, tekton.ReasonTrainJobDeleted))
	msg := run.Status.Succeeded().Message
	assert.Contains(t, msg, "TrainJob "+tj.Name+" was deleted before it finished")
	assert.NotContains(t, msg, "kept")
}

// Two failures then a success: two archived attempts, three distinct TrainJobs, Succeeded=True;
// each attempt is a step that ended (docs/cost.md), the last two retries.
func TestRetryAttemptGetsANewTrainJob(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctl := startController(t, ns)
	create(t, jaxRun(t, ns, "train", "fail-twice", "retries: 2"))
	run := waitRun(t, ns, "train", succeeded(corev1.ConditionTrue, ""))
	require.Len(t, run.Status.RetriesStatus, 2)
	seen := map[string]bool{}
	for i, rs := range run.Status.RetriesStatus {
		cond := rs.Succeeded()
		require.NotNil(t, cond, "attempt %d", i)
		assert.Equal(t, corev1.ConditionFalse, cond.Status)
		assert.Equal(t, "FailedJobs", cond.Reason)
		assert.Contains(t, cond.Message, "flaky: attempt")
		assert.NotNil(t, rs.StartTime)
		var x struct{ TrainJob string }
		require.NoError(t, json.Unmarshal(rs.ExtraFields.Raw, &x))
		seen[x.TrainJob] = true
	}
	name, _ := result(run, trainjob.OutName)
	seen[name] = true
	assert.Len(t, seen, 3, "each attempt has its own TrainJob: %v", seen)
	assert.Len(t, testenv.TrainJobs(t.Context(), t, c, ns), 3)
	assert.InDelta(t, 3, counterSum(t, ctl, stepmetrics.StepsEnded), 0, "each attempt ended")
	assert.InDelta(t, 2, counterSum(t, ctl, stepmetrics.Retries), 0, "attempts 1 and 2")
}

func TestRetriesExhausted(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	startController(t, ns)
	create(t, jaxRun(t, ns, "train", "fail", "retries: 1"))
	run := waitRun(t, ns, "train", succeeded(corev1.ConditionFalse, "FailedJobs"))
	assert.Len(t, run.Status.RetriesStatus, 1)
}

// Bad params fail the run at once, name the param, and create nothing.
func TestBadInputNamesTheFieldAndCreatesNothing(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		params string
		want   []string
	}{
		"unknown framework": {
			params: "- {name: framework, value: tensorflowx}\n- {name: trainer.func, value: 'def f(): pass'}",
			want:   []string{`param "framework"`},
		},
		"num nodes zero": {
			params: "- {name: framework, value: jax}\n- {name: trainer.func, value: 'def f(): pass'}\n- {name: trainer.numNodes, value: '0'}",
			want:   []string{`param "trainer.numNodes"`},
		},
		"misspelt trainer field": {
			params: "- {name: framework, value: jax}\n- {name: trainer.func, value: 'def f(): pass'}\n- {name: trainer.numNode, value: '2'}",
			want:   []string{"trainer.numNode"},
		},
		"step is not YAML": {
			params: "- {name: step, value: 'framework: [jax'}",
			want:   []string{`param "step"`, "not valid YAML"},
		},
		"unknown step field": {
			params: "- {name: frameworkk, value: jax}",
			want:   []string{`param "frameworkk"`},
		},
		"bad param name": {
			params: "- {name: 'trainer..x', value: jax}",
			want:   []string{`param "trainer..x"`, "dotted path"},
		},
		"no trainer": {
			params: "- {name: framework, value: jax}",
			want:   []string{"trainer"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			startController(t, ns)
			create(t, customRun(t, ns, "metadata: {name: train}\nspec:\n  "+ours+"  params:\n  "+indent(tc.params)))
			run := waitRun(t, ns, "train", succeeded(corev1.ConditionFalse, tekton.ReasonInvalidParams))
			for _, w := range tc.want {
				assert.Contains(t, run.Status.Succeeded().Message, w)
			}
			assert.NotNil(t, run.Status.CompletionTime)
			assert.Empty(t, testenv.TrainJobs(t.Context(), t, c, ns), "a run with bad params created a TrainJob")
		})
	}
}

// A controller restarted while the job runs finds the same TrainJob (no duplicate) and still
// reports its completion.
func TestRestartMidJob(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	first := startController(t, ns)
	create(t, jaxRun(t, ns, "train", "hold"))
	waitRun(t, ns, "train", succeeded(corev1.ConditionUnknown, "Running"))
	tj := oneTrainJob(t, ns)
	first.Stop()

	startController(t, ns)
	require.NoError(t, sim.Finish(t.Context(), ns, tj.Name, trainersim.Behavior{Mode: trainersim.Succeed}))
	run := waitRun(t, ns, "train", succeeded(corev1.ConditionTrue, ""))
	name, _ := result(run, trainjob.OutName)
	assert.Equal(t, tj.Name, name)
	tjs := testenv.TrainJobs(t.Context(), t, c, ns)
	require.Len(t, tjs, 1)
	assert.Equal(t, tj.UID, tjs[0].UID)
}

// Tekton patches spec.status=RunCancelled onto every child, finished ones too: a finished run's
// outcome never changes (the generation-reset trap).
func TestCancelPatchOnFinishedRun(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	startController(t, ns)
	create(t, jaxRun(t, ns, "train", "succeed"))
	done := waitRun(t, ns, "train", succeeded(corev1.ConditionTrue, ""))
	patchSpec(t, done.DeepCopy(), cancelPatch)
	after := waitRun(t, ns, "train", func(ct *assert.CollectT, run *v1beta1.CustomRun) {
		assert.Greater(ct, run.Generation, done.Generation)
		assert.Equal(ct, run.Generation, run.Status.ObservedGeneration, "the controller has not acted on the cancel patch yet")
	})
	assert.Equal(t, *done.Status.Succeeded(), *after.Status.Succeeded())
	assert.Equal(t, done.Status.Results, after.Status.Results)
	assert.Equal(t, done.Status.CompletionTime, after.Status.CompletionTime)
	assert.Len(t, testenv.TrainJobs(t.Context(), t, c, ns), 1, "a finished run's TrainJob is left to the owner's lifetime")
}

// A finished run's outcome is re-asserted if someone rewrites it, and what the controller's
// cache does not hold of a finished run (its results, trimCustomRun) is kept: the re-assertion
// patches the condition, it does not write the status whole.
func TestFinishedRunIsReasserted(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	startController(t, ns)
	create(t, jaxRun(t, ns, "train", "succeed"))
	done := waitRun(t, ns, "train", succeeded(corev1.ConditionTrue, tekton.ReasonSucceeded))
	require.NotEmpty(t, done.Status.Results)
	tampered := done.DeepCopy()
	tampered.Status.Succeeded().Status, tampered.Status.Succeeded().Reason = corev1.ConditionFalse, "Tampered"
	require.NoError(t, c.Status().Update(t.Context(), tampered))
	// The stored run says False until the controller has put the outcome back.
	after := waitRun(t, ns, "train", succeeded(corev1.ConditionTrue, tekton.ReasonSucceeded))
	assert.Equal(t, *done.Status.Succeeded(), *after.Status.Succeeded())
	assert.Equal(t, done.Status.Results, after.Status.Results)
	assert.Equal(t, done.Status.CompletionTime, after.Status.CompletionTime)
}

// Runs for other custom tasks are not touched.
func TestForeignRunsIgnored(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	startController(t, ns)
	create(t, customRun(t, ns, "metadata: {name: other}\nspec:\n  customRef: {apiVersion: wait.testing.tekton.dev/v1beta1, kind: Wait}\n"))
	create(t, jaxRun(t, ns, "train", "succeed"))
	waitRun(t, ns, "train", succeeded(corev1.ConditionTrue, ""))
	other := get(t, t.Context(), ns, "other")
	assert.Empty(t, other.Status.Conditions)
	assert.Len(t, testenv.TrainJobs(t.Context(), t, c, ns), 1)
}

// An embedded customSpec works like a customRef, and params override it.
func TestEmbeddedSpec(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	startController(t, ns)
	create(t, customRun(t, ns, `
metadata: {name: train}
spec:
  customSpec:
    apiVersion: `+tekton.APIVersion+`
    kind: `+tekton.Kind+`
    spec:
      framework: jax
      trainer: {func: "def train(): pass", numNodes: 3}
      labels: {sim-mode: hold}
  params:
  - {name: labels.sim-mode, value: succeed}
`))
	run := waitRun(t, ns, "train", succeeded(corev1.ConditionTrue, ""))
	v, _ := result(run, trainjob.OutNumNodes)
	assert.Equal(t, "3", v)
}

// A TrainJob deleted by someone else fails the attempt instead of leaving the run hanging.
func TestTrainJobDeletedUnderneath(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	startController(t, ns)
	create(t, jaxRun(t, ns, "train", "hold"))
	tj := oneTrainJob(t, ns)
	require.NoError(t, c.Delete(t.Context(), &tj))
	run := waitRun(t, ns, "train", succeeded(corev1.ConditionFalse, tekton.ReasonTrainJobDeleted))
	assert.Contains(t, run.Status.Succeeded().Message, tj.Name)
}

// Data between steps: a workspace bound to a PVC (preprocess wrote to it) becomes a volume of the
// TrainJob's pods, mounted in the trainer at /workspace/<name>, and the run's serviceAccountName
// (Tekton's taskRunSpecs) their ServiceAccount.
func TestWorkspacesBecomeVolumesOfTheTrainJob(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	startController(t, ns)
	create(t, jaxRun(t, ns, "train", "hold", "serviceAccountName: trainer", "workspaces: [{name: data, persistentVolumeClaim: {claimName: shared}}]"))
	tj := oneTrainJob(t, ns)
	b, err := json.Marshal(tj.Spec)
	require.NoError(t, err)
	spec := string(b)
	assert.Contains(t, spec, `"claimName":"shared"`)
	assert.Contains(t, spec, `"mountPath":"/workspace/data"`)
	assert.Contains(t, spec, `"serviceAccountName":"trainer"`)
}

// A binding that cannot reach the TrainJob's pods fails the run at once, naming it and the fix.
func TestUnmountableWorkspaceIsRefused(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	startController(t, ns)
	create(t, jaxRun(t, ns, "train", "hold", "workspaces: [{name: data, volumeClaimTemplate: {spec: {accessModes: [ReadWriteOnce]}}}]"))
	run := waitRun(t, ns, "train", succeeded(corev1.ConditionFalse, tekton.ReasonWorkspaceNotSupported))
	assert.Contains(t, run.Status.Succeeded().Message, `workspace "data"`)
	assert.Contains(t, run.Status.Succeeded().Message, "bind a persistentVolumeClaim")
	assert.Empty(t, testenv.TrainJobs(t.Context(), t, c, ns))
}
