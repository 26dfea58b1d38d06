package argo

import (
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/core/trainjob"
)

// retryingWorkflow is a running workflow as Argo v3.7.3 records a plugin step with a
// retryStrategy whose attempt 0 failed (its agent died) and whose attempt 1 runs: the Retry node
// named by {{node.name}} stays Running, its children are named parent(N). Beside it, a plugin
// step without a retryStrategy, finished, and a long-running pod step.
func retryingWorkflow() *wfv1.Workflow {
	return &wfv1.Workflow{
		ObjectMeta: metav1.ObjectMeta{Name: "wf", Namespace: "argo", UID: "uid", Labels: map[string]string{"workflows.argoproj.io/phase": "Running"}},
		Spec:       wfv1.WorkflowSpec{Templates: []wfv1.Template{{Name: "train"}}},
		Status: wfv1.WorkflowStatus{Phase: wfv1.WorkflowRunning, Nodes: wfv1.Nodes{
			"wf":     {ID: "wf", Name: "wf", Type: wfv1.NodeTypeSteps, Phase: wfv1.NodeRunning, Children: []string{"wf-r", "wf-p"}},
			"wf-r":   {ID: "wf-r", Name: "wf[0].train", Type: wfv1.NodeTypeRetry, Phase: wfv1.NodeRunning, Children: []string{"wf-r0", "wf-r1"}},
			"wf-r0":  {ID: "wf-r0", Name: "wf[0].train(0)", Type: wfv1.NodeTypePlugin, Phase: wfv1.NodeFailed, Message: "connection refused " + strings.Repeat("x", 4096)},
			"wf-r1":  {ID: "wf-r1", Name: "wf[0].train(1)", Type: wfv1.NodeTypePlugin, Phase: wfv1.NodeRunning},
			"wf-p":   {ID: "wf-p", Name: "wf[0].once", Type: wfv1.NodeTypePlugin, Phase: wfv1.NodeSucceeded},
			"wf-pod": {ID: "wf-pod", Name: "wf[0].prep", Type: wfv1.NodeTypePod, Phase: wfv1.NodeRunning, Message: strings.Repeat("y", 4096)},
			"wf-pr":  {ID: "wf-pr", Name: "wf[0].prep-retry", Type: wfv1.NodeTypeRetry, Phase: wfv1.NodeRunning, Children: []string{"wf-pod"}},
		}},
	}
}

func jobFor(key, attempt string) *trainer.TrainJob {
	return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{
		Annotations: map[string]string{trainjob.AnnotationStepKey: key},
		Labels:      map[string]string{trainjob.LabelAttempt: attempt, trainjob.LabelOwnerUID: "uid"},
	}}
}

// retriedJob is the TrainJob of the step's own retry block: retry of the engine's attempt
// engine, with retry.limit limit, as lifecycle numbers and labels it.
func retriedJob(key string, engine, retry, limit int) *trainer.TrainJob {
	id := trainjob.Identity{Engine: Engine, OwnerUID: "uid", StepKey: key}.AtRetry(engine, engine*(limit+1)+retry)
	return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Annotations: id.Annotations(), Labels: id.Labels()}}
}

// followedJob is a TrainJob another workflow's step made, which this workflow's step follows
// (docs/cache.md): its step key names the other workflow's node.
func followedJob(key, attempt string) *trainer.TrainJob {
	tj := jobFor(key, attempt)
	tj.Labels[trainjob.LabelOwnerUID] = "other-uid"
	tj.Labels[trainjob.HoldKey("uid")] = "0123456789abcdef"
	return tj
}

// The janitor finds the node a TrainJob was made for by its step key and attempt: under a
// retryStrategy the key names the Retry parent and the attempt picks its child, so a failed
// attempt's job goes while the next attempt's stays; under the step's own retry block too. The same holds of the trimmed Workflow the
// janitor caches.
func TestOrphanedFollowsArgosRetries(t *testing.T) {
	whole := retryingWorkflow()
	trimmed, err := trimForJanitor(whole.DeepCopy())
	require.NoError(t, err)
	cases := map[string]struct {
		job    *trainer.TrainJob
		orphan bool
	}{
		"attempt 0, failed":                                  {job: jobFor("wf[0].train", "0"), orphan: true},
		"attempt 1, running":                                 {job: jobFor("wf[0].train", "1")},
		"attempt 2, not started yet: the parent":             {job: jobFor("wf[0].train", "2")},
		"no retryStrategy, node finished":                    {job: jobFor("wf[0].once", "0"), orphan: true},
		"a node Argo has not recorded yet":                   {job: jobFor("wf[1].later", "0")},
		"a job with no step key (not the plugin's)":          {job: jobFor("", "0")},
		"a job it follows, whose node is another workflow's": {job: followedJob("wf[0].once", "0")},
		// Under the step's own retry block (limit 2) attempt 1's retry 1 is TrainJob attempt 4, and
		// attempt 0's retry 1 is TrainJob attempt 1: not Argo's attempt 1, whose node runs.
		"attempt 1's own retry 1, running": {job: retriedJob("wf[0].train", 1, 1, 2)},
		"attempt 0's own retry 1, failed":  {job: retriedJob("wf[0].train", 0, 1, 2), orphan: true},
	}
	for name, tc := range cases {
		for wfName, wf := range map[string]*wfv1.Workflow{"whole": whole, "trimmed": trimmed.(*wfv1.Workflow)} {
			t.Run(name+"/"+wfName, func(t *testing.T) {
				why := orphaned(wf, tc.job)
				assert.Equal(t, tc.orphan, why != "", why)
			})
		}
	}
}

// The Workflow the janitor caches keeps what orphaned and stopping read, and sheds the rest:
// templates, labels, other nodes, long messages, and every node once the workflow is done.
func TestTrimForJanitor(t *testing.T) {
	wf := retryingWorkflow()
	wf.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "workflow-controller"}}
	got, err := trimForJanitor(wf)
	require.NoError(t, err)
	out := got.(*wfv1.Workflow)
	assert.Empty(t, out.ManagedFields)
	assert.Empty(t, out.Spec.Templates)
	assert.Empty(t, out.Labels)
	ids := make([]string, 0, len(out.Status.Nodes))
	for id, n := range out.Status.Nodes {
		ids = append(ids, id)
		assert.LessOrEqual(t, len(n.Message), janitorMessage+len("…"))
	}
	assert.ElementsMatch(t, []string{"wf-r", "wf-r0", "wf-r1", "wf-p"}, ids, "plugin nodes and the Retry nodes around them only")
	again, err := trimForJanitor(out.DeepCopy())
	require.NoError(t, err)
	assert.Equal(t, out, again, "an informer may transform an object twice: trimming is idempotent")

	wf.Status.Phase = wfv1.WorkflowSucceeded
	wf.Labels[LabelCompleted] = "true"
	got, err = trimForJanitor(wf)
	require.NoError(t, err)
	out = got.(*wfv1.Workflow)
	assert.Empty(t, out.Status.Nodes, "a finished workflow needs no node")
	assert.Equal(t, map[string]string{LabelCompleted: "true"}, out.Labels)
	assert.NotEmpty(t, stopping(out))
}
