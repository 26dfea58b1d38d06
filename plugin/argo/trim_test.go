package argo

import (
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/core/trainjob"
)

// The trimmed Workflow answers every question the plugin asks of a Workflow as the whole one
// does, and keeps none of the bytes it never reads.
func TestTrimmedWorkflowAnswersAsTheWholeOne(t *testing.T) {
	started := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	big := wfv1.AnyStringPtr(string(make([]byte, 64<<10)))
	whole := func() *wfv1.Workflow {
		return &wfv1.Workflow{
			ObjectMeta: metav1.ObjectMeta{Name: "wf", Namespace: "ns", UID: "u-1", ResourceVersion: "7",
				Labels:        map[string]string{LabelCompleted: "false"},
				Annotations:   map[string]string{"big": string(make([]byte, 16<<10))},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "workflow-controller"}}},
			Spec: wfv1.WorkflowSpec{Entrypoint: "main", Templates: []wfv1.Template{{Name: "main"}, {Name: "train"}}},
			Status: wfv1.WorkflowStatus{Phase: wfv1.WorkflowRunning, StartedAt: started, Nodes: wfv1.Nodes{
				"wf-1": {ID: "wf-1", Name: "wf.train", Phase: wfv1.NodeRunning, Outputs: &wfv1.Outputs{Parameters: []wfv1.Parameter{
					{Name: trainjob.OutName, Value: wfv1.AnyStringPtr("train-abc")}, {Name: "log", Value: big}}}},
				"wf-2": {ID: "wf-2", Name: "wf.prep", Phase: wfv1.NodeSucceeded, Outputs: &wfv1.Outputs{Parameters: []wfv1.Parameter{{Name: "data", Value: big}}}},
				"wf-3": {ID: "wf-3", Name: "wf.eval", Phase: wfv1.NodePending, Message: string(make([]byte, 4<<10))},
			}},
		}
	}
	for _, tc := range []struct {
		name string
		edit func(wf *wfv1.Workflow)
	}{
		{"running", func(*wfv1.Workflow) {}},
		{"shutdown", func(wf *wfv1.Workflow) { wf.Spec.Shutdown = wfv1.ShutdownStrategyTerminate }},
		{"completed label", func(wf *wfv1.Workflow) { wf.Labels[LabelCompleted] = "true" }},
		{"failed", func(wf *wfv1.Workflow) { wf.Status.Phase = wfv1.WorkflowFailed }},
		{"deleted", func(wf *wfv1.Workflow) { wf.DeletionTimestamp = &started }},
		{"not started", func(wf *wfv1.Workflow) { wf.Status.StartedAt = metav1.Time{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := whole()
			tc.edit(w)
			got, err := trimWorkflow(w.DeepCopy())
			require.NoError(t, err)
			trimmed := got.(*wfv1.Workflow)
			assert.Equal(t, stopping(w), stopping(trimmed))
			assert.Equal(t, runOf(w), runOf(trimmed))
			assert.Equal(t, w.UID, trimmed.UID)
			assert.Equal(t, w.ResourceVersion, trimmed.ResourceVersion)
			assert.Equal(t, []string{"wf-1"}, keys(trimmed.Status.Nodes), "only the node that made a TrainJob")
			assert.Equal(t, []wfv1.Parameter{{Name: trainjob.OutName, Value: wfv1.AnyStringPtr("train-abc")}}, trimmed.Status.Nodes["wf-1"].Outputs.Parameters)
			assert.Empty(t, trimmed.Spec.Templates)
			assert.Empty(t, trimmed.Annotations)
			assert.Empty(t, trimmed.ManagedFields)
		})
	}
	other, err := trimWorkflow("a tombstone")
	require.NoError(t, err)
	assert.Equal(t, "a tombstone", other, "anything but a Workflow passes through")
}

func keys(n wfv1.Nodes) []string {
	var out []string
	for k := range n {
		out = append(out, k)
	}
	return out
}
