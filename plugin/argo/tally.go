package argo

import (
	"context"
	"fmt"
	"maps"
	"slices"
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

// tallyAnnotation is where the janitor's cache keeps, on its trimmed copy of a Workflow (never
// written back), the tally of each trainstep step of it that ended (trimForJanitor): one line per
// node, its ID@end (Unix seconds) and then tallyFields. A few dozen bytes a step, for finished Workflows are most of
// the cache and keep these alone.
const tallyAnnotation = "trainstep.dev/tallies"

// tallyFields are the outputs a tally line keeps, after the node's ID, in this order, "-" for an
// empty one; then "retry" or "-": whether Argo ran the node as attempt 1 or later of a retryStrategy.
var tallyFields = stepmetrics.Counted

// tallyRetry marks, in a tally line, a node Argo's retryStrategy ran as attempt 1 or later.
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
	for _, line := range strings.Split(wf.Annotations[tallyAnnotation], "\n") {
		id, outs, retry, ok := readTally(line)
		if !ok || seen.ids[id] {
			continue
		}
		seen.ids[strings.Clone(id)] = true // not a slice of the cached annotation, which an update replaces
		add(outs, retry)
	}
}

// tallyOf is the tally line of node n (tallyAnnotation), a trainstep step that ended with the
// plugin's verdict, or "" for any other node. retryOf is the name of the Retry node n is an
// attempt of, if any.
func tallyOf(n wfv1.NodeStatus, retryOf string) string {
	if n.Type != wfv1.NodeTypePlugin || n.Outputs == nil || !n.Phase.Fulfilled(nil) {
		return ""
	}
	outs := map[string]string{}
	for _, p := range n.Outputs.Parameters {
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
	// The node's end in its key: `argo retry` of a workflow makes a failed node again under its
	// ID, and its new end is another step's end.
	fields := []string{n.ID + "@" + strconv.FormatInt(n.FinishedAt.Unix(), 10)}
	for _, name := range tallyFields {
		fields = append(fields, orDash(outs[name]))
	}
	retry := "-"
	if retryAttempt(n.Name, retryOf) > 0 {
		retry = tallyRetry
	}
	return strings.Join(append(fields, retry), " ")
}

// orDash is v, or "-" for an empty v (or one with a space or a line break, which no counted
// output has: a tally line's fields are split at spaces).
func orDash(v string) string {
	if v == "" || strings.ContainsAny(v, " \n") {
		return "-"
	}
	return v
}

// tallies are the tally lines of wf's nodes, those its trimmed copy already keeps (an informer
// may transform an object twice) and those of its nodes that ended, sorted by node ID.
func tallies(wf *wfv1.Workflow) string {
	lines := map[string]string{}
	for _, line := range strings.Split(wf.Annotations[tallyAnnotation], "\n") {
		if id, _, _, ok := readTally(line); ok {
			lines[id] = line
		}
	}
	parents := retryParents(wf.Status.Nodes)
	for id, n := range wf.Status.Nodes {
		if line := tallyOf(n, parents[id]); line != "" {
			lines[id] = line
		}
	}
	ids := slices.Sorted(maps.Keys(lines))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		out = append(out, lines[id])
	}
	return strings.Join(out, "\n")
}

// readTally reads a tally line: the node's ID@end, the outputs to count and whether it is a retry.
func readTally(line string) (string, map[string]string, bool, bool) {
	fields := strings.Split(line, " ")
	if len(fields) != len(tallyFields)+2 {
		return "", nil, false, false
	}
	outs := map[string]string{}
	for i, name := range tallyFields {
		if v := fields[i+1]; v != "-" {
			outs[name] = v
		}
	}
	return fields[0], outs, fields[len(fields)-1] == tallyRetry, true
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
