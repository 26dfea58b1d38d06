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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	require.Len(t, r.Node.Outputs.Parameters, len(trainjob.OutputNames)+1, "every core output, declared or not, and metric-loss")
	for i, n := range append(trainjob.OutputNames, trainjob.MetricPrefix+"loss") {
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
	class, _ := r.Output(trainjob.OutFailureClass)
	require.NotEmpty(t, class)
	assert.True(t, strings.HasPrefix(r.Node.Message, "failure-class="+class+" retryable="), r.Node.Message)

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
			args, tjName := startStep(t, h, wf, "hold")

			end(t, wf)
			require.Eventually(t, func() bool {
				err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: tjName}, &trainer.TrainJob{})
				return apierrors.IsNotFound(err)
			}, testenv.Timeout, testenv.Interval, "the TrainJob must be deleted")

			if name != "workflow deleted (owner reference)" {
				r, err := argotest.Execute(t.Context(), h.URL, h.Token, args)
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
	b := get(t, h.Metrics+"/metrics")
	for _, line := range strings.Split(b, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

// recordNode does what Argo's controller does with a reply the agent patched into the
// WorkflowTaskSet: it copies the reply's phase, message and outputs onto the node in
// status.nodes.
func recordNode(t *testing.T, wf *wfv1.Workflow, node string, r argotest.Reply) {
	t.Helper()
	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(wf), wf))
	if wf.Status.Nodes == nil {
		wf.Status.Nodes = wfv1.Nodes{}
	}
	id := wf.NodeID(node)
	wf.Status.Nodes.Set(id, wfv1.NodeStatus{ID: id, Name: node, Type: wfv1.NodeTypePlugin, Phase: r.Node.Phase, Message: r.Node.Message, Outputs: r.Node.Outputs})
	require.NoError(t, c.Update(t.Context(), wf))
}

// TestArgoRetryGetsANewTrainJob: `argo retry` keeps the workflow UID, {{node.name}} and resets
// {{retries}}, so the retried node sends the very call that failed. It must get a new TrainJob,
// not the failed one; an ordinary replay after that still finds the new one.
func TestArgoRetryGetsANewTrainJob(t *testing.T) {
	ns := env.Namespace(t)
	h := startPlugin(t, ns, func(o *argo.Options) { o.HoldMax = 0 })
	wf := workflow(t, ns)
	args, err := argotest.Args(wf.Name, ns, string(wf.UID), step(wf.Name+".train", "hold"))
	require.NoError(t, err)
	r, err := argotest.Execute(t.Context(), h.URL, h.Token, args)
	require.NoError(t, err)
	require.NotNil(t, r.Node, "body: %s", r.Body)
	first, _ := r.Output(trainjob.OutName)
	require.NotEmpty(t, first, r.Node.Message)
	require.NoError(t, sim.Finish(t.Context(), ns, first, trainersim.Behavior{Mode: trainersim.Fail, Log: []string{"boom"}}))
	r = callUntil(t, h, args)
	require.Equal(t, wfv1.NodeFailed, r.Node.Phase)
	recordNode(t, wf, wf.Name+".train", r)

	// The workflow fails, then `argo retry`.
	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(wf), wf))
	wf.Status.Phase = wfv1.WorkflowFailed
	wf.Labels = map[string]string{argo.LabelCompleted: "true"}
	require.NoError(t, c.Update(t.Context(), wf))
	require.NoError(t, c.Update(t.Context(), argoRetry(wf)))

	var second string
	require.Eventually(t, func() bool {
		r, err := argotest.Execute(t.Context(), h.URL, h.Token, args)
		require.NoError(t, err)
		require.NotNil(t, r.Node, "body: %s", r.Body)
		second, _ = r.Output(trainjob.OutName)
		return r.Node.Phase != wfv1.NodeFailed && second != "" // a stopping workflow gets Failed until the cache sees the retry
	}, testenv.Timeout, testenv.Interval, "the retried node must not be answered with the failed TrainJob")
	assert.NotEqual(t, first, second, "the retried node gets a new TrainJob")

	r, err = argotest.Execute(t.Context(), h.URL, h.Token, args)
	require.NoError(t, err)
	require.NotNil(t, r.Node)
	again, _ := r.Output(trainjob.OutName)
	assert.Equal(t, second, again, "a replay of the retried node finds its TrainJob")
	assert.NotEqual(t, wfv1.NodeFailed, r.Node.Phase, r.Node.Message)
	assert.Len(t, testenv.TrainJobs(t.Context(), t, c, ns), 2, "the failed TrainJob is kept, one new one runs")
}

// TestTrainJobDeletedUnderneath: a TrainJob deleted between calls (kubectl delete trainjob) is
// not created again from zero: the step fails saying so, in the same process and after a
// restart, which knows from the Workflow's node status that the job was made.
func TestTrainJobDeletedUnderneath(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(map[bool]string{false: "same process", true: "after a restart"}[restart], func(t *testing.T) {
			ns := env.Namespace(t)
			h := startPlugin(t, ns, func(o *argo.Options) { o.HoldMax = 0 })
			wf := workflow(t, ns)
			args, err := argotest.Args(wf.Name, ns, string(wf.UID), step(wf.Name+".train", "hold"))
			require.NoError(t, err)
			r, err := argotest.Execute(t.Context(), h.URL, h.Token, args)
			require.NoError(t, err)
			require.NotNil(t, r.Node, "body: %s", r.Body)
			name, _ := r.Output(trainjob.OutName)
			require.NotEmpty(t, name, r.Node.Message)
			recordNode(t, wf, wf.Name+".train", r)
			if restart {
				h.stop()
			}

			require.NoError(t, c.Delete(t.Context(), &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}))
			require.Eventually(t, func() bool {
				return apierrors.IsNotFound(c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, &trainer.TrainJob{}))
			}, testenv.Timeout, testenv.Interval)
			if restart {
				h = startPlugin(t, ns, func(o *argo.Options) { o.HoldMax = 0 })
			}

			require.Eventually(t, func() bool {
				r, err = argotest.Execute(t.Context(), h.URL, h.Token, args)
				require.NoError(t, err)
				require.NotNil(t, r.Node, "body: %s", r.Body)
				return r.Node.Phase == wfv1.NodeFailed // the cache may still show the job for a moment
			}, testenv.Timeout, testenv.Interval, "the step must fail")
			assert.Contains(t, r.Node.Message, name)
			assert.Contains(t, r.Node.Message, "was deleted")
			assert.Nil(t, r.Requeue)
			assert.Empty(t, testenv.TrainJobs(t.Context(), t, c, ns), "no TrainJob may be created again")
		})
	}
}

// argoRetry is what `argo retry` (util.FormulateRetryWorkflow in Argo v3.7.3, through
// createNewRetryWorkflow) does to a failed workflow, on the fields the plugin reads: the completed
// label goes, the phase is Running again, status.startedAt is now and the failed execution nodes
// are removed from status.nodes (the controller creates them again, with the same IDs and names).
// Calling Argo's function itself would link its server (argo-events, SQL drivers with cgo) into
// this suite.
func argoRetry(wf *wfv1.Workflow) *wfv1.Workflow {
	n := wf.DeepCopy()
	delete(n.Labels, argo.LabelCompleted)
	n.Status.Phase = wfv1.WorkflowRunning
	n.Status.StartedAt = metav1.NewTime(time.Now().UTC())
	n.Status.FinishedAt = metav1.Time{}
	n.Spec.Shutdown = ""
	for id, node := range wf.Status.Nodes {
		if node.FailedOrError() && node.Type == wfv1.NodeTypePlugin {
			delete(n.Status.Nodes, id)
		}
	}
	return n
}

// TestWorkflowNotStartedIsPending: a call that beats the controller's write of status.startedAt
// (the run is part of the identity) is answered Pending and creates nothing, so the TrainJob is
// made once, under the run's identity.
func TestWorkflowNotStartedIsPending(t *testing.T) {
	ns := env.Namespace(t)
	h := startPlugin(t, ns, func(o *argo.Options) { o.HoldMax = 0 })
	wf := &wfv1.Workflow{}
	wf.Namespace, wf.GenerateName = ns, "wf-"
	wf.Spec.Entrypoint = "main"
	wf.Spec.Templates = []wfv1.Template{{Name: "main", Suspend: &wfv1.SuspendTemplate{}}}
	require.NoError(t, c.Create(t.Context(), wf))
	args, err := argotest.Args(wf.Name, ns, string(wf.UID), step(wf.Name+".train", "hold"))
	require.NoError(t, err)
	r, err := argotest.Execute(t.Context(), h.URL, h.Token, args)
	require.NoError(t, err)
	require.NotNil(t, r.Node, "body: %s", r.Body)
	assert.Equal(t, wfv1.NodePending, r.Node.Phase)
	assert.Contains(t, r.Node.Message, "status.startedAt")
	assert.NotNil(t, r.Requeue)
	assert.Empty(t, testenv.TrainJobs(t.Context(), t, c, ns))

	wf.Status.Phase, wf.Status.StartedAt = wfv1.WorkflowRunning, metav1.Now()
	require.NoError(t, c.Update(t.Context(), wf))
	require.Eventually(t, func() bool {
		r, err = argotest.Execute(t.Context(), h.URL, h.Token, args)
		require.NoError(t, err)
		name, _ := r.Output(trainjob.OutName)
		return name != ""
	}, testenv.Timeout, testenv.Interval, "once the workflow has started, the step starts")
	assert.Len(t, testenv.TrainJobs(t.Context(), t, c, ns), 1)
}
