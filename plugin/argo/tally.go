package argo

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/stepmetrics"
	"github.com/trainstep/trainstep/core/trainjob"
)

// tallyParam is the one output parameter the janitor's cache keeps of a trainstep step that
// ended (trimForJanitor): the outputs stepmetrics counts, and whether Argo ran the node as a
// retry, URL-encoded. A finished Workflow keeps these and nothing else of its nodes.
const tallyParam = "trainstep.dev/tally"

// tallyRetry marks, in a tally, a node Argo's retryStrategy ran as attempt 1 or later.
const tallyRetry = "retry"

// tally counts the Argo face's steps that ended (core/stepmetrics) from what each Workflow's
// node records: the plugin's last reply, whose outputs Argo stores on the node, so the counts
// are the face's own verdicts, cache hits and refused steps included, and outlive the agent pod
// that answered. Only the leader's janitor reconciles, so only it counts; each node is counted
// once per process (counted). A process that starts leading counts nothing of the steps that had
// ended before (baseline): its predecessor counted them, and its counters start from zero as
// Prometheus expects of a restarted process. Steps that end while no janitor leads are not
// counted; none is counted twice.
type tally struct {
	ended *stepmetrics.Ended

	mu        sync.Mutex
	baselined bool
	counted   map[types.NamespacedName]countedNodes
}

// countedNodes are the nodes of one Workflow (by its UID: a Workflow made again under the same
// name starts afresh) that have been counted.
type countedNodes struct {
	uid types.UID
	ids map[string]bool
}

func newTally() *tally {
	return &tally{ended: stepmetrics.New(Engine), counted: map[types.NamespacedName]countedNodes{}}
}

// register adds the tally's series to reg.
func (t *tally) register(reg prometheus.Registerer) error {
	for _, c := range t.ended.Collectors() {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("registering the janitor's step metrics: %w", err)
		}
	}
	return nil
}

// baseline marks counted, once, every step that had ended in the Workflows c holds when this
// process begins to count.
func (t *tally) baseline(ctx context.Context, c client.Reader) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.baselined {
		return nil
	}
	list := &wfv1.WorkflowList{}
	if err := c.List(ctx, list); err != nil {
		return fmt.Errorf("listing Workflows to start counting steps from: %w", err)
	}
	for i := range list.Items {
		t.each(&list.Items[i], func(map[string]string, bool) {})
	}
	t.baselined = true
	return nil
}

// count counts wf's steps that ended and were not counted yet.
func (t *tally) count(wf *wfv1.Workflow) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.each(wf, func(outs map[string]string, retry bool) { t.ended.Count(wf.Namespace, outs, retry) })
}

// forget drops what is known of a Workflow that is gone.
func (t *tally) forget(name types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.counted, name)
}

// each calls add for each of wf's ended steps not counted yet, and marks it counted.
func (t *tally) each(wf *wfv1.Workflow, add func(outs map[string]string, retry bool)) {
	name := types.NamespacedName{Namespace: wf.Namespace, Name: wf.Name}
	seen, ok := t.counted[name]
	if !ok || seen.uid != wf.UID {
		seen = countedNodes{uid: wf.UID, ids: map[string]bool{}}
		t.counted[name] = seen
	}
	for id, n := range wf.Status.Nodes {
		if seen.ids[id] {
			continue
		}
		outs, retry, ok := readTally(n)
		if !ok {
			continue
		}
		seen.ids[id] = true
		add(outs, retry)
	}
}

// tallyOf is the tally of node n, a trainstep step that ended with the plugin's verdict, or ""
// for any other node. retryOf is the name of the Retry node n is an attempt of, if any. A node
// trimmed before keeps its tally as it was: an informer may transform an object twice.
func tallyOf(n wfv1.NodeStatus, retryOf string) string {
	if n.Type != wfv1.NodeTypePlugin || n.Outputs == nil || !n.Phase.Fulfilled(nil) {
		return ""
	}
	outs := map[string]string{}
	for _, p := range n.Outputs.Parameters {
		if p.Name == tallyParam {
			return p.Value.String()
		}
		if p.Value != nil {
			outs[p.Name] = p.Value.String()
		}
	}
	// Every reply of the plugin carries every core output, trainjob-name among them, which no
	// other plugin's node is known to have; a phase that is not terminal is a node Argo ended
	// itself (its agent lost, its workflow stopped) without trainstep's verdict.
	if _, ours := outs[trainjob.OutName]; !ours || !trainjob.Phase(outs[trainjob.OutPhase]).Terminal() {
		return ""
	}
	v := url.Values{}
	for _, name := range stepmetrics.Counted {
		if outs[name] != "" {
			v.Set(name, outs[name])
		}
	}
	if retryAttempt(n.Name, retryOf) > 0 {
		v.Set(tallyRetry, "true")
	}
	return v.Encode()
}

// readTally reads the tally a trimmed node keeps: the outputs to count and whether it is a retry.
func readTally(n wfv1.NodeStatus) (map[string]string, bool, bool) {
	if n.Outputs == nil {
		return nil, false, false
	}
	for _, p := range n.Outputs.Parameters {
		if p.Name != tallyParam || p.Value == nil {
			continue
		}
		v, err := url.ParseQuery(p.Value.String())
		if err != nil {
			return nil, false, false
		}
		outs := map[string]string{}
		for name := range v {
			outs[name] = v.Get(name)
		}
		return outs, outs[tallyRetry] == "true", true
	}
	return nil, false, false
}

// retryAttempt is N for attempt parent(N) of a Retry node (retryChildName), else 0.
func retryAttempt(name, parent string) int {
	if parent == "" {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(name, parent+"("), ")"))
	if err != nil || name != retryChildName(parent, strconv.Itoa(n)) {
		return 0
	}
	return n
}

// retryParents maps each node that is an attempt of a Retry node to that node's name.
func retryParents(nodes wfv1.Nodes) map[string]string {
	parents := map[string]string{}
	for _, n := range nodes {
		if n.Type != wfv1.NodeTypeRetry {
			continue
		}
		for _, c := range n.Children {
			parents[c] = n.Name
		}
	}
	return parents
}
