package argo

import (
	"strings"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/core/trainjob"
)

// trimWorkflow keeps of a cached Workflow only what the plugin reads: its identity, labels and
// deletion (the reaper's completed/deleted), spec.shutdown, status.phase and status.startedAt
// (the retry identity), of each node only its trainjob output (whose TrainJob the node made),
// and of its plugin nodes and the Retry nodes around them their name, type and start (when a
// step's attempt and its first attempt began: since.go). A workflow's templates, arguments and
// the inputs, outputs and messages of all its nodes are most of its bytes, and grow with the
// workflow, not with trainstep's steps in it.
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
		kept := wfv1.NodeStatus{ID: n.ID, Name: n.Name, DisplayName: n.DisplayName, Phase: n.Phase}
		keep := false
		if n.Type == wfv1.NodeTypePlugin || (n.Type == wfv1.NodeTypeRetry && wrapsPlugin(wf.Status.Nodes, n)) {
			kept.Type, kept.StartedAt, kept.Children = n.Type, n.StartedAt, pluginChildren(wf.Status.Nodes, n)
			keep = true
		}
		if n.Outputs != nil {
			for _, p := range n.Outputs.Parameters {
				if p.Name == trainjob.OutName {
					kept.Outputs = &wfv1.Outputs{Parameters: []wfv1.Parameter{p}}
					keep = true
				}
			}
		}
		if !keep {
			continue
		}
		if out.Status.Nodes == nil {
			out.Status.Nodes = wfv1.Nodes{}
		}
		out.Status.Nodes[id] = kept
	}
	return out, nil
}

// janitorMessage bounds the node message the janitor keeps, for its log line: a failed node's
// message can carry a log tail.
const janitorMessage = 256

// trimForJanitor keeps of a cached Workflow only what the Janitor reads, for it caches every
// Workflow of the cluster, most of them long finished: its identity, the completed label and its
// deletion, spec.shutdown and status.phase (stopping); while it runs, the nodes a TrainJob can
// belong to (stepNode): its plugin nodes and the Retry nodes that wrap them, each with its
// name, type, phase and the start of its message; and, in an annotation of this copy alone, the
// tally of each trainstep step that ended (tally.go), a few dozen bytes. A finished workflow keeps
// no node, its steps' tallies alone: every unfinished TrainJob of it goes whatever its node says.
func trimForJanitor(obj any) (any, error) {
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
			DeletionTimestamp: wf.DeletionTimestamp,
		},
		Spec:   wfv1.WorkflowSpec{Shutdown: wf.Spec.Shutdown},
		Status: wfv1.WorkflowStatus{Phase: wf.Status.Phase},
	}
	if v, ok := wf.Labels[LabelCompleted]; ok {
		out.Labels = map[string]string{LabelCompleted: v}
	}
	if t := tallies(wf); t != "" {
		out.Annotations = map[string]string{tallyAnnotation: t}
	}
	if stopping(out) != "" {
		return out, nil
	}
	for id, n := range wf.Status.Nodes {
		keep := n.Type == wfv1.NodeTypePlugin || (n.Type == wfv1.NodeTypeRetry && wrapsPlugin(wf.Status.Nodes, n))
		if !keep {
			continue
		}
		if out.Status.Nodes == nil {
			out.Status.Nodes = wfv1.Nodes{}
		}
		msg := n.Message
		if len(msg) > janitorMessage {
			msg = strings.ToValidUTF8(msg[:janitorMessage], "") + "…"
		}
		out.Status.Nodes[id] = wfv1.NodeStatus{ID: n.ID, Name: n.Name, Type: n.Type, Phase: n.Phase, Message: msg, Children: pluginChildren(wf.Status.Nodes, n)}
	}
	return out, nil
}

// wrapsPlugin reports whether a Retry node's attempts are plugin nodes.
func wrapsPlugin(nodes wfv1.Nodes, n wfv1.NodeStatus) bool {
	return len(pluginChildren(nodes, n)) > 0
}

// pluginChildren are the IDs of a node's children that are plugin nodes. A trimmed Retry node
// keeps them, so that trimming it again keeps it: an informer may run its transform more than
// once on one object.
func pluginChildren(nodes wfv1.Nodes, n wfv1.NodeStatus) []string {
	var ids []string
	for _, c := range n.Children {
		if child, ok := nodes[c]; ok && child.Type == wfv1.NodeTypePlugin {
			ids = append(ids, c)
		}
	}
	return ids
}
