package argo

import (
	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/core/trainjob"
)

// trimWorkflow keeps of a cached Workflow only what the plugin reads: its identity, labels and
// deletion (the reaper's completed/deleted), spec.shutdown, status.phase and status.startedAt
// (the retry identity), and of each node only its trainjob output (whose TrainJob the node
// made). A workflow's templates, arguments and the inputs, outputs and messages of all its nodes
// are most of its bytes, and grow with the workflow, not with trainstep's steps in it.
func trimWorkflow(obj any) (any, error) {
	wf, ok := obj.(*wfv1.Workflow)
	if !ok {
		return obj, nil
	}
	out := &wfv1.Workflow{
		TypeMeta: wf.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              wf.Name,
			Namespace:         wf.Namespace,
			UID:               wf.UID,
			ResourceVersion:   wf.ResourceVersion,
			Generation:        wf.Generation,
			CreationTimestamp: wf.CreationTimestamp,
			DeletionTimestamp: wf.DeletionTimestamp,
			Labels:            wf.Labels,
		},
		Spec:   wfv1.WorkflowSpec{Shutdown: wf.Spec.Shutdown},
		Status: wfv1.WorkflowStatus{Phase: wf.Status.Phase, StartedAt: wf.Status.StartedAt, FinishedAt: wf.Status.FinishedAt},
	}
	for id, n := range wf.Status.Nodes {
		if n.Outputs == nil {
			continue
		}
		for _, p := range n.Outputs.Parameters {
			if p.Name != trainjob.OutName {
				continue
			}
			if out.Status.Nodes == nil {
				out.Status.Nodes = wfv1.Nodes{}
			}
			out.Status.Nodes[id] = wfv1.NodeStatus{ID: n.ID, Name: n.Name, DisplayName: n.DisplayName, Phase: n.Phase,
				Outputs: &wfv1.Outputs{Parameters: []wfv1.Parameter{p}}}
		}
	}
	return out, nil
}
