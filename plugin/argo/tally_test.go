package argo

import (
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trainstep/trainstep/core/stepmetrics"
	"github.com/trainstep/trainstep/core/trainjob"
)

// replied is a plugin node as Argo records the plugin's last reply: its phase and every output
// (outputs, as the plugin renders them).
func replied(id, name string, phase wfv1.NodePhase, obs trainjob.Observation) wfv1.NodeStatus {
	n := wfv1.NodeStatus{ID: id, Name: name, Type: wfv1.NodeTypePlugin, Phase: phase, Outputs: outputs(obs, nil)}
	if phase.Fulfilled(nil) {
		n.FinishedAt = metav1.Unix(5000, 0)
	}
	return n
}

// endedWorkflow is a workflow of every kind of step the janitor meets: one that trained on two
// nodes with four GPUs each for an hour (after 20 s queued and 30 s lost to an earlier attempt),
// one that ran out of memory, attempt 1 of a retryStrategy, a cache hit (whose stored outputs
// carry the cost of the job that trained), one refused before any TrainJob, one Argo failed
// without trainstep's verdict (its agent lost), one still running, and another plugin's node.
func endedWorkflow(uid types.UID, phase wfv1.WorkflowPhase) *wfv1.Workflow {
	at := func(s int) *time.Time { v := time.Unix(1000+int64(s), 0); return &v }
	wait, lost := 20*time.Second, 30*time.Second
	trained := trainjob.Observation{Name: "tj-a", Namespace: "team-a", Phase: trainjob.PhaseSucceeded, StartTime: at(0), CompletionTime: at(3620),
		QueueWait: &wait, TrainingStart: at(20), NumNodes: 2, Accelerators: 4, Lost: &lost}
	oom := trainjob.Observation{Name: "tj-b", Namespace: "team-a", Phase: trainjob.PhaseFailed, Failure: trainjob.Classified(trainjob.ClassOOM),
		StartTime: at(0), CompletionTime: at(60), TrainingStart: at(10), NumNodes: 1}
	retried := trainjob.Observation{Name: "tj-c", Namespace: "team-a", Phase: trainjob.PhaseSucceeded, StartTime: at(0), CompletionTime: at(10), TrainingStart: at(0), NumNodes: 1}
	hit := trainjob.Observation{Namespace: "team-a", Phase: trainjob.PhaseSucceeded, CacheKey: "k", Cached: &trainjob.Cached{From: "tj-a", Outputs: trained.Outputs()}}
	refused := trainjob.Observation{Namespace: "team-a", Phase: trainjob.PhaseFailed, Failure: trainjob.Classified(trainjob.ClassInvalid)}
	return &wfv1.Workflow{
		ObjectMeta: metav1.ObjectMeta{Name: "wf", Namespace: "team-a", UID: uid},
		Status: wfv1.WorkflowStatus{Phase: phase, Nodes: wfv1.Nodes{
			"n-a":   replied("n-a", "wf[0].a", wfv1.NodeSucceeded, trained),
			"n-b":   replied("n-b", "wf[0].b", wfv1.NodeFailed, oom),
			"n-r":   {ID: "n-r", Name: "wf[0].c", Type: wfv1.NodeTypeRetry, Phase: wfv1.NodeSucceeded, Children: []string{"n-r0", "n-r1"}},
			"n-r0":  replied("n-r0", "wf[0].c(0)", wfv1.NodeFailed, trainjob.Observation{Name: "tj-c0", Namespace: "team-a", Phase: trainjob.PhaseRunning}),
			"n-r1":  replied("n-r1", "wf[0].c(1)", wfv1.NodeSucceeded, retried),
			"n-hit": replied("n-hit", "wf[0].d", wfv1.NodeSucceeded, hit),
			"n-bad": replied("n-bad", "wf[0].e", wfv1.NodeFailed, refused),
			"n-run": replied("n-run", "wf[0].f", wfv1.NodeRunning, trainjob.Observation{Name: "tj-f", Namespace: "team-a", Phase: trainjob.PhaseRunning}),
			"n-oth": {ID: "n-oth", Name: "wf[0].g", Type: wfv1.NodeTypePlugin, Phase: wfv1.NodeSucceeded,
				Outputs: &wfv1.Outputs{Parameters: []wfv1.Parameter{{Name: "phase", Value: wfv1.AnyStringPtr("Succeeded")}}}},
		}},
	}
}

// cached is wf as the janitor's cache holds it.
func cached(t *testing.T, wf *wfv1.Workflow) *wfv1.Workflow {
	t.Helper()
	out, err := trimForJanitor(wf)
	require.NoError(t, err)
	return out.(*wfv1.Workflow)
}

// testJanitor is a Janitor whose cache holds wfs, and the registry its series are on.
func testJanitor(t *testing.T, wfs ...*wfv1.Workflow) (*Janitor, client.WithWatch, *prometheus.Registry) {
	t.Helper()
	scheme, err := trainjob.NewScheme(wfv1.AddToScheme)
	require.NoError(t, err)
	objs := make([]client.Object, 0, len(wfs))
	for _, wf := range wfs {
		objs = append(objs, cached(t, wf))
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	reg := prometheus.NewRegistry()
	j := &Janitor{client: c, tally: newTally()}
	require.NoError(t, j.tally.register(reg))
	return j, c, reg
}

func reconcileWorkflow(t *testing.T, j *Janitor, name string) {
	t.Helper()
	_, err := j.Reconcile(t.Context(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: name}})
	require.NoError(t, err)
}

// endedWorkflowSeries is what endedWorkflow's steps count: five ended with trainstep's verdict
// (the node Argo failed itself, the running one and the other plugin's are not steps that
// ended); the cache hit adds no cost; GPU seconds are 2 nodes x 4 GPUs x 3600 s.
const endedWorkflowSeries = `
# HELP trainstep_step_cache_hits_total Ended steps the step cache served (a stored success, or another step's TrainJob they followed), by namespace.
# TYPE trainstep_step_cache_hits_total counter
trainstep_step_cache_hits_total{face="argo",namespace="team-a"} 1
# HELP trainstep_step_gpu_seconds_total Accelerator seconds ended steps trained for (nodes x accelerators per node x training time; gpu-hours x 3600), by namespace and failure class.
# TYPE trainstep_step_gpu_seconds_total counter
trainstep_step_gpu_seconds_total{face="argo",failure_class="none",namespace="team-a"} 28800
# HELP trainstep_step_retries_total Ended steps that were a retry of an earlier attempt by the engine (Argo's retryStrategy, Tekton's retries), by namespace.
# TYPE trainstep_step_retries_total counter
trainstep_step_retries_total{face="argo",namespace="team-a"} 1
# HELP trainstep_step_seconds_total Seconds ended steps spent, by namespace, failure class and bucket: queued, initializing, training, lost (earlier attempts).
# TYPE trainstep_step_seconds_total counter
trainstep_step_seconds_total{bucket="initializing",face="argo",failure_class="oom",namespace="team-a"} 10
trainstep_step_seconds_total{bucket="lost",face="argo",failure_class="none",namespace="team-a"} 30
trainstep_step_seconds_total{bucket="queued",face="argo",failure_class="none",namespace="team-a"} 20
trainstep_step_seconds_total{bucket="training",face="argo",failure_class="none",namespace="team-a"} 3610
trainstep_step_seconds_total{bucket="training",face="argo",failure_class="oom",namespace="team-a"} 50
# HELP trainstep_steps_ended_total Steps that ended, by namespace, phase and failure class (none when it succeeded).
# TYPE trainstep_steps_ended_total counter
trainstep_steps_ended_total{face="argo",failure_class="invalid",namespace="team-a",phase="Failed"} 1
trainstep_steps_ended_total{face="argo",failure_class="none",namespace="team-a",phase="Succeeded"} 3
trainstep_steps_ended_total{face="argo",failure_class="oom",namespace="team-a",phase="Failed"} 1
`

// The janitor counts each step that ended once, from its node, however often the Workflow is
// reconciled or its cached copy trimmed again, and after the Workflow finished (which keeps
// the tallies alone).
func TestJanitorCountsEachEndedStepOnce(t *testing.T) {
	j, c, reg := testJanitor(t)
	require.NoError(t, j.tally.baseline(t.Context(), c)) // it led before the workflow began
	running := endedWorkflow("uid-1", wfv1.WorkflowRunning)
	require.NoError(t, c.Create(t.Context(), cached(t, running)))
	reconcileWorkflow(t, j, "wf")
	reconcileWorkflow(t, j, "wf")

	done := endedWorkflow("uid-1", wfv1.WorkflowSucceeded)
	again := cached(t, cached(t, done))
	assert.Empty(t, again.Status.Nodes, "a finished workflow keeps its tallies alone")
	assert.Equal(t, []string{
		"n-a@5000 Succeeded - - 20 0 3600 30 8 -",
		"n-b@5000 Failed oom - - 10 50 0 0 -",
		"n-bad@5000 Failed invalid - - - - - - -",
		"n-hit@5000 Succeeded - true 20 0 3600 30 8 -",
		"n-r1@5000 Succeeded - - - 0 10 0 0 retry",
	}, strings.Split(again.Annotations[tallyAnnotation], "\n"), "a few dozen bytes a step")
	again.ResourceVersion = ""
	current := &wfv1.Workflow{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(again), current))
	again.ResourceVersion = current.ResourceVersion
	require.NoError(t, c.Update(t.Context(), again))
	reconcileWorkflow(t, j, "wf")

	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(endedWorkflowSeries)))
}

// A janitor that starts leading (a restart, or the other replica taking over) counts nothing
// of the steps that had ended before: the janitor that led then counted them. A step that ends
// later is counted, a node `argo retry` runs again is counted again, and a Workflow made again
// under the same name counts afresh.
func TestJanitorAfterARestartCountsOnlyWhatEndsLater(t *testing.T) {
	before := endedWorkflow("uid-1", wfv1.WorkflowRunning)
	delete(before.Status.Nodes, "n-a")
	j, c, reg := testJanitor(t, before)
	reconcileWorkflow(t, j, "wf")
	reconcileWorkflow(t, j, "wf")
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	require.Zero(t, n, "the steps that ended before it led")

	later := endedWorkflow("uid-1", wfv1.WorkflowRunning)
	update := cached(t, later)
	current := &wfv1.Workflow{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(update), current))
	update.ResourceVersion = current.ResourceVersion
	require.NoError(t, c.Update(t.Context(), update))
	reconcileWorkflow(t, j, "wf")
	assert.InDelta(t, 1, succeeded(t, reg), 0, "n-a alone")

	// `argo retry` of the workflow makes a node again under its ID: its new end is counted.
	rerun := endedWorkflow("uid-1", wfv1.WorkflowRunning)
	again := rerun.Status.Nodes["n-a"]
	again.FinishedAt = metav1.Unix(6000, 0)
	rerun.Status.Nodes["n-a"] = again
	update = cached(t, rerun)
	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(update), current))
	update.ResourceVersion = current.ResourceVersion
	require.NoError(t, c.Update(t.Context(), update))
	reconcileWorkflow(t, j, "wf")
	assert.InDelta(t, 2, succeeded(t, reg), 0, "n-a's first end, then its second")

	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(update), current))
	require.NoError(t, c.Delete(t.Context(), current))
	reconcileWorkflow(t, j, "wf")
	require.NoError(t, c.Create(t.Context(), cached(t, endedWorkflow("uid-2", wfv1.WorkflowRunning))))
	reconcileWorkflow(t, j, "wf")
	assert.InDelta(t, 5, succeeded(t, reg), 0, "n-a twice, then the new workflow's three")
}

// succeeded is the count of steps that succeeded.
func succeeded(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != stepmetrics.StepsEnded {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "phase" && l.GetValue() == string(trainjob.PhaseSucceeded) {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}
