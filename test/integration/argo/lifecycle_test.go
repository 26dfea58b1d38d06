package argo_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/pkg/plugins/executor"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/argo"
	"github.com/trainstep/trainstep/test/internal/argotest"
	"github.com/trainstep/trainstep/test/internal/testenv"
	"github.com/trainstep/trainstep/test/internal/trainersim"
)

// callUntil calls until the reply is terminal (the agent's loop, with no requeue delay).
func callUntil(t *testing.T, h *harness, args executor.ExecuteTemplateArgs) argotest.Reply {
	t.Helper()
	deadline := time.Now().Add(testenv.Timeout)
	for {
		r, err := argotest.Execute(t.Context(), h.URL, h.Token, args)
		require.NoError(t, err)
		require.Equal(t, 200, r.Status, "body: %s", r.Body)
		require.NotNil(t, r.Node, "body: %s", r.Body)
		if r.Node.Phase == wfv1.NodeSucceeded || r.Node.Phase == wfv1.NodeFailed {
			return r
		}
		require.NotNil(t, r.Requeue, "an unfinished reply must carry a requeue")
		require.True(t, time.Now().Before(deadline), "still %s: %s", r.Node.Phase, r.Node.Message)
	}
}

func TestSucceedsWithEveryOutput(t *testing.T) {
	ns := env.Namespace(t)
	h := startPlugin(t, ns, nil)
	wf := workflow(t, ns)
	args, err := argotest.Args(wf.Name, ns, string(wf.UID), step("train", "succeed"), argotest.WithOutputs(trainjob.OutName, trainjob.OutMetrics))
	require.NoError(t, err)
	r := callUntil(t, h, args)
	require.Equal(t, wfv1.NodeSucceeded, r.Node.Phase, r.Node.Message)
	assert.Nil(t, r.Requeue)
	require.Len(t, r.Node.Outputs.Parameters, len(trainjob.OutputNames), "every core output, declared or not")
	for i, n := range trainjob.OutputNames {
		assert.Equal(t, n, r.Node.Outputs.Parameters[i].Name)
	}
	name, _ := r.Output(trainjob.OutName)
	phase, _ := r.Output(trainjob.OutPhase)
	metrics, _ := r.Output(trainjob.OutMetrics)
	assert.Equal(t, "Succeeded", phase)
	assert.JSONEq(t, `{"loss":"0.125"}`, metrics)

	tj := &trainer.TrainJob{}
	require.NoError(t, c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, tj))
	require.Len(t, tj.OwnerReferences, 1)
	assert.Equal(t, "Workflow", tj.OwnerReferences[0].Kind)
	assert.Equal(t, wf.UID, tj.OwnerReferences[0].UID)
	assert.Equal(t, argo.Engine, tj.Labels[trainjob.LabelEngine])
}

// TestRunsTheTrainerForReal runs the step's Python function through the simulator's local
// backend: the outputs are those of a real run.
func TestRunsTheTrainerForReal(t *testing.T) {
	ns := env.Namespace(t)
	h := startPlugin(t, ns, nil)
	body := `key: train
framework: xgboost
trainer:
  numNodes: 2
  funcArgs: {epochs: 3}
  func: |
    def train(epochs):
        import os
        print("worker", os.environ["DMLC_TASK_ID"], "of", os.environ["DMLC_NUM_WORKER"], "epochs", epochs)
        return {"epochs": epochs, "model_uri": "s3://bucket/model", "worker": int(os.environ["DMLC_TASK_ID"])}
`
	args, err := wfArgs(t, ns, body, argotest.WithOutputs(trainjob.OutResult, "result-model_uri", "result-accuracy"))
	require.NoError(t, err)
	r := callUntil(t, h, args)
	require.Equal(t, wfv1.NodeSucceeded, r.Node.Phase, r.Node.Message)
	nodes, _ := r.Output(trainjob.OutNumNodes)
	assert.Equal(t, "2", nodes)
	// Rank 0's return value, from node 0's termination message, as parameters.
	res, _ := r.Output(trainjob.OutResult)
	assert.JSONEq(t, `{"epochs": 3, "model_uri": "s3://bucket/model", "worker": 0}`, res)
	uri, _ := r.Output("result-model_uri")
	assert.Equal(t, "s3://bucket/model", uri)
	worker, _ := r.Output("result-worker")
	assert.Equal(t, "0", worker)
	missing, ok := r.Output("result-accuracy")
	assert.True(t, ok, "a declared result-<key> the value lacks is still an output")
	assert.Empty(t, missing)
}

func TestFailureCarriesTheLogTail(t *testing.T) {
	ns := env.Namespace(t)
	h := startPlugin(t, ns, nil)
	args, err := wfArgs(t, ns, step("train", "fail"))
	require.NoError(t, err)
	r := callUntil(t, h, args)
	require.Equal(t, wfv1.NodeFailed, r.Node.Phase)
	assert.Nil(t, r.Requeue, "a Failed reply with a requeue is polled again")
	assert.Contains(t, r.Node.Message, "RuntimeError: CUDA out of memory")
	phase, _ := r.Output(trainjob.OutPhase)
	assert.Equal(t, "Failed", phase)
}

func TestRetryAttemptGetsANewTrainJob(t *testing.T) {
	ns := env.Namespace(t)
	h := startPlugin(t, ns, func(o *argo.Options) { o.HoldMax = 0 })
	names := map[string]bool{}
	wf := workflow(t, ns)
	for _, attempt := range []string{"0", "1", "1"} {
		args, err := argotest.Args(wf.Name, ns, string(wf.UID), step("train", "hold", `attempt: "`+attempt+`"`), argotest.WithRetry(3))
		require.NoError(t, err)
		r, err := argotest.Execute(t.Context(), h.URL, h.Token, args)
		require.NoError(t, err)
		require.NotNil(t, r.Node, "body: %s", r.Body)
		name, _ := r.Output(trainjob.OutName)
		require.NotEmpty(t, name, r.Node.Message)
		names[name] = true
	}
	assert.Len(t, names, 2, "attempts 0 and 1 get a TrainJob each; a replayed attempt 1 finds its own")
	assert.Len(t, testenv.TrainJobs(t.Context(), t, c, ns), 2)
}

// TestCancelDeletesTheTrainJob: Argo never tells the plugin about stop, terminate or a
// failed workflow; the plugin sees the Workflow change and deletes the unfinished TrainJob.
func TestCancelDeletesTheTrainJob(t *testing.T) {
	cases := map[string]func(t *testing.T, wf *wfv1.Workflow){
		"stop": func(t *testing.T, wf *wfv1.Workflow) {
			wf.Spec.Shutdown = wfv1.ShutdownStrategyStop
			require.NoError(t, c.Update(t.Context(), wf))
		},
		"terminate": func(t *testing.T, wf *wfv1.Workflow) {
			wf.Spec.Shutdown = wfv1.ShutdownStrategyTerminate
			require.NoError(t, c.Update(t.Context(), wf))
		},
		"workflow failed": func(t *testing.T, wf *wfv1.Workflow) {
			wf.Status.Phase = wfv1.WorkflowFailed
			require.NoError(t, c.Update(t.Context(), wf))
		},
		"workflow deleted (owner reference)": func(t *testing.T, wf *wfv1.Workflow) {
			require.NoError(t, c.Delete(t.Context(), wf))
		},
	}
	for name, end := range cases {
		t.Run(name, func(t *testing.T) {
			ns := env.Namespace(t)
			h := startPlugin(t, ns, func(o *argo.Options) { o.HoldMax = 0 })
			wf := workflow(t, ns)
			args, err := argotest.Args(wf.Name, ns, string(wf.UID), step("train", "hold"))
			require.NoError(t, err)
			r, err := argotest.Execute(t.Context(), h.URL, h.Token, args)
			require.NoError(t, err)
			require.NotNil(t, r.Node, "body: %s", r.Body)
			tjName, _ := r.Output(trainjob.OutName)
			require.NotEmpty(t, tjName, r.Node.Message)

			end(t, wf)
			require.Eventually(t, func() bool {
				err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: tjName}, &trainer.TrainJob{})
				return apierrors.IsNotFound(err)
			}, testenv.Timeout, testenv.Interval, "the TrainJob must be deleted")

			if name != "workflow deleted (owner reference)" {
				r, err = argotest.Execute(t.Context(), h.URL, h.Token, args)
				require.NoError(t, err)
				require.NotNil(t, r.Node)
				assert.Equal(t, wfv1.NodeFailed, r.Node.Phase, "a stopping workflow gets no new TrainJob")
				assert.Empty(t, testenv.TrainJobs(t.Context(), t, c, ns))
			}
		})
	}
}

func TestTimeoutDeletesTheTrainJob(t *testing.T) {
	cases := map[string]struct {
		extra   string
		tmpl    func(*wfv1.Template)
		keep    bool
		wantMsg string
	}{
		"step timeout deletes":        {extra: "timeout: 2s", wantMsg: "within 2s; it was deleted"},
		"template timeout deletes":    {tmpl: argotest.WithTimeout("2s"), wantMsg: "within 2s; it was deleted"},
		"keepOnTimeout keeps the job": {extra: "timeout: 2s\nkeepOnTimeout: true", keep: true, wantMsg: "it was kept"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ns := env.Namespace(t)
			h := startPlugin(t, ns, nil)
			var opts []func(*wfv1.Template)
			if tc.tmpl != nil {
				opts = append(opts, tc.tmpl)
			}
			args, err := wfArgs(t, ns, step("train", "hold", tc.extra), opts...)
			require.NoError(t, err)
			r := callUntil(t, h, args)
			require.Equal(t, wfv1.NodeFailed, r.Node.Phase)
			assert.Contains(t, r.Node.Message, tc.wantMsg)
			phase, _ := r.Output(trainjob.OutPhase)
			assert.Equal(t, string(trainjob.PhaseTimedOut), phase)
			name, _ := r.Output(trainjob.OutName)
			err = c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, &trainer.TrainJob{})
			if tc.keep {
				assert.NoError(t, err)
			} else {
				assert.True(t, apierrors.IsNotFound(err), "the TrainJob must be deleted: %v", err)
			}
		})
	}
}

// TestRestartMidJob: a new plugin process finds the TrainJob the old one started and reports
// its completion.
func TestRestartMidJob(t *testing.T) {
	ns := env.Namespace(t)
	first := startPlugin(t, ns, func(o *argo.Options) { o.HoldMax = 0 })
	args, err := wfArgs(t, ns, step("train", "hold"))
	require.NoError(t, err)
	r, err := argotest.Execute(t.Context(), first.URL, first.Token, args)
	require.NoError(t, err)
	require.NotNil(t, r.Node)
	name, _ := r.Output(trainjob.OutName)
	first.stop()

	require.NoError(t, sim.Finish(t.Context(), ns, name, trainersim.Behavior{Mode: trainersim.Succeed}))
	second := startPlugin(t, ns, nil)
	r = callUntil(t, second, args)
	assert.Equal(t, wfv1.NodeSucceeded, r.Node.Phase, r.Node.Message)
	got, _ := r.Output(trainjob.OutName)
	assert.Equal(t, name, got)
	assert.Len(t, testenv.TrainJobs(t.Context(), t, c, ns), 1)
}

// TestHeldCallAnswersOnCompletion: a held call returns as soon as the TrainJob finishes, and
// calls beyond maxHeld are answered at once.
func TestHeldCallAnswersOnCompletion(t *testing.T) {
	ns := env.Namespace(t)
	h := startPlugin(t, ns, func(o *argo.Options) { o.HoldMax = 20 * time.Second; o.MaxHeld = 1 })
	args, err := wfArgs(t, ns, step("train", "hold"))
	require.NoError(t, err)
	other, err := wfArgs(t, ns, step("other", "hold"))
	require.NoError(t, err)

	// Create both jobs first (each first call is held, so run them with the cap taken).
	held := argotest.ExecuteAsync(t.Context(), h.URL, h.Token, args)
	var name string
	require.Eventually(t, func() bool {
		l := &trainer.TrainJobList{}
		if c.List(t.Context(), l, client.InNamespace(ns)) != nil || len(l.Items) != 1 {
			return false
		}
		name = l.Items[0].Name
		return true
	}, testenv.Timeout, testenv.Interval)
	require.Eventually(t, func() bool { return metric(t, h, "trainstep_argo_held_calls") == "1" }, testenv.Timeout, testenv.Interval)

	// A call beyond maxHeld is refused a hold: it is answered in progress with a requeue, and the
	// refusal is counted (evidence, not a stopwatch).
	r, err := argotest.Execute(t.Context(), h.URL, h.Token, other)
	require.NoError(t, err)
	require.NotNil(t, r.Node, "body: %s", r.Body)
	assert.NotEqual(t, wfv1.NodeSucceeded, r.Node.Phase)
	assert.NotNil(t, r.Requeue)
	assert.Equal(t, "1", metric(t, h, "trainstep_argo_hold_refused_total"), "a call beyond maxHeld must not be held")

	require.NoError(t, sim.Finish(t.Context(), ns, name, trainersim.Behavior{Mode: trainersim.Succeed}))
	select {
	case a := <-held:
		require.NoError(t, a.Err)
		require.NotNil(t, a.Reply.Node)
		// Had the hold run out (20 s) instead, the reply would be Running with a requeue: a
		// Succeeded reply is the informer event answering the held call.
		assert.Equal(t, wfv1.NodeSucceeded, a.Reply.Node.Phase)
		assert.Nil(t, a.Reply.Requeue)
	case <-time.After(testenv.Timeout):
		t.Fatal("the held call did not answer")
	}
	assert.NotEqual(t, "", metric(t, h, `trainstep_argo_execute_calls_total{outcome="Succeeded"}`))
}

var metricMu sync.Mutex

// metric returns a sample's value from /metrics, "" if absent.
func metric(t testing.TB, h *harness, name string) string {
	t.Helper()
	metricMu.Lock()
	defer metricMu.Unlock()
	b := get(t, h.URL+"/metrics")
	for _, line := range strings.Split(b, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}
