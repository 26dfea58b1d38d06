package argo

import (
	"strconv"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
)

// stepTimes are when the step's attempt and its first attempt began, as the Workflow's nodes
// say. The key ({{node.name}}) names the plugin node, or, with a retryStrategy, the Retry node
// Argo wraps the attempts in: its start is the first attempt's, and attempt N is its child
// key(N) (janitor.go's stepNode). Neither is before the run's start (`argo retry` starts a new
// run and keeps the nodes that succeeded). Zero when the Workflow does not show them: a key
// that is not a node's name, or a cache that lags behind the node.
//
// The attempt's start is what its timeout and startTimeout count from, as Argo's own template
// timeout does, so a step whose TrainJob cannot be created still ends at its timeout; the first
// attempt's is what lost-seconds counts from, so an attempt whose TrainJob a deadline deleted is
// still counted.
func stepTimes(wf *wfv1.Workflow, req *request) (attempt, first time.Time) {
	if wf == nil {
		return time.Time{}, time.Time{}
	}
	node := wf.Status.Nodes.FindByName(req.Key)
	if node == nil || (node.Type != wfv1.NodeTypePlugin && node.Type != wfv1.NodeTypeRetry) {
		return time.Time{}, time.Time{}
	}
	first = notBefore(node.StartedAt.Time, wf.Status.StartedAt.Time)
	if node.Type == wfv1.NodeTypePlugin {
		return first, first
	}
	if child := wf.Status.Nodes.FindByName(retryChildName(req.Key, strconv.Itoa(req.Attempt))); child != nil {
		attempt = notBefore(child.StartedAt.Time, wf.Status.StartedAt.Time)
	}
	return attempt, first
}

// notBefore is t, or floor when t is earlier; zero when t is.
func notBefore(t, floor time.Time) time.Time {
	if t.IsZero() || !t.Before(floor) {
		return t
	}
	return floor
}
