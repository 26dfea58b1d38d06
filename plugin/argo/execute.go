package argo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/pkg/plugins/executor"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/lifecycle"
	"github.com/trainstep/trainstep/core/trainjob"
)

// Outcomes label the calls metric: a reply phase, or why there was no node in the reply.
const (
	outcomeForeign    = "foreign"
	outcomeForbidden  = "forbidden"
	outcomeBadRequest = "bad_request"
	outcomeTooLarge   = "too_large"
	outcomeInvalid    = "invalid"
)

// result is one answered call, for the log line and the metrics.
type result struct {
	reply    executor.ExecuteTemplateReply
	outcome  string
	req      *request
	trainJob string
	held     time.Duration
	notice   *time.Duration // terminal condition → this reply
}

// call is a request as parsed: what to answer without reading the cluster (early: not ours, or
// invalid), or the step to follow (req). It depends only on the request body and is shared by
// every call with that body, so nothing may change it.
type call struct {
	template string // the template's name, for the log
	workflow string // namespace/name, for the log
	req      *request
	early    *result
}

// parseCall reads a decoded request: whether it is ours, and the step it asks for.
func (p *Plugin) parseCall(args executor.ExecuteTemplateArgs) *call {
	c := &call{}
	if args.Template != nil {
		c.template = args.Template.Name
	}
	if args.Workflow != nil {
		c.workflow = args.Workflow.ObjectMeta.Namespace + "/" + args.Workflow.ObjectMeta.Name
	}
	early := func(r result) *call {
		c.early = &r
		return c
	}
	body, err := pluginBody(args.Template, p.opts.Key)
	if err != nil || body == nil {
		return early(result{outcome: outcomeForeign}) // not ours: 200 {} and the agent asks the next plugin
	}
	if args.Workflow == nil || args.Workflow.ObjectMeta.UID == "" || args.Workflow.ObjectMeta.Namespace == "" {
		return early(p.failed(nil, outcomeInvalid, "the request names no workflow (metadata.uid and metadata.namespace are required)"))
	}
	req, err := parseRequest(args, p.opts.Key, body)
	if err != nil {
		return early(p.failed(nil, outcomeInvalid, err.Error()))
	}
	if req.Namespace != p.opts.Namespace {
		return early(p.failed(req, outcomeInvalid, fmt.Sprintf("this trainstep plugin serves namespace %s, not %s: install it in the workflow's namespace", p.opts.Namespace, req.Namespace)))
	}
	c.req = req
	return c
}

// execute answers one parsed call once ready says the cache has listed. It never returns an
// error the agent would treat as fatal for a step that may still succeed: API trouble is a
// Pending reply with a requeue.
func (p *Plugin) execute(ctx context.Context, c *call, ready func(context.Context) bool) result {
	if c.early != nil {
		return *c.early
	}
	req := c.req
	if !ready(ctx) {
		return p.pending(req, "", "trainstep is still reading the cluster (informer cache not synced)")
	}
	wf, err := p.workflowOf(ctx, p.reader, req)
	if err != nil {
		return p.pending(req, "", fmt.Sprintf("reading workflow %s: %v", req.Workflow.Name, err))
	}
	if wf != nil {
		if why := stopping(wf); why != "" {
			return p.failed(req, string(wfv1.NodeFailed), fmt.Sprintf("not starting a TrainJob: %s", why))
		}
		if wf.Status.StartedAt.IsZero() {
			// The controller records status.startedAt in the same pass that hands the node to the
			// agent; a call can beat that write. The run is part of the identity, so wait for it.
			return p.pending(req, "", fmt.Sprintf("workflow %s has not recorded its start yet (status.startedAt)", wf.Name))
		}
	}
	run, err := p.runIdentity(ctx, req, wf)
	if err != nil {
		return p.pending(req, "", err.Error())
	}
	s := lifecycle.Step{Spec: req.Spec, Namespace: req.Namespace, Identity: run.id, Deadlines: req.deadlines()}
	s.Deadlines.Since, s.FirstSince = stepTimes(run.wf, req)
	for _, name := range lifecycle.TrainJobNames(s) {
		if p.createdBefore(run.wf, req.Namespace, name) {
			// This step made its TrainJob on an earlier call: if it is gone, someone deleted it.
			s.Recorded = name
			break
		}
	}
	return p.follow(ctx, req, s, run)
}

// stepRun is the step's identity in the workflow's run, and, when found says so, the attempt's
// TrainJob as Find read it for that identity: the first look uses it instead of reading it again.
type stepRun struct {
	id    trainjob.Identity
	wf    *wfv1.Workflow
	job   *trainer.TrainJob
	found bool
}

// runIdentity is the step's identity in the run of wf. Before a finished job is answered, the
// run is made sure of: `argo retry` resets status.startedAt, and a lagging cache must not hand
// the retried node the failed job of the run before. One read from the apiserver, once per step.
func (p *Plugin) runIdentity(ctx context.Context, req *request, wf *wfv1.Workflow) (stepRun, error) {
	id := req.identityIn(wf)
	existing, err := p.engine.Find(ctx, req.Namespace, id)
	if err != nil {
		return stepRun{}, err
	}
	run := stepRun{id: id, wf: wf, job: existing, found: true}
	if existing == nil || !id.Adopts(existing) || wf == nil || !trainjob.Observe(existing, nil).Phase.Terminal() {
		return run, nil
	}
	if fresh, ferr := p.workflowOf(ctx, p.api, req); ferr == nil && fresh != nil && runOf(fresh) != runOf(wf) {
		return stepRun{id: req.identityIn(fresh), wf: fresh}, nil // another run: its job is not found yet
	}
	return run, nil
}

func (p *Plugin) syncWait() time.Duration {
	if p.opts.HoldMax > 0 {
		return p.opts.HoldMax
	}
	return 5 * time.Second
}

// workflowOf reads the request's Workflow; nil when there is none with the request's UID. From a
// cache it is the cached object itself (no copy of its node statuses per call): read it only.
func (p *Plugin) workflowOf(ctx context.Context, r client.Reader, req *request) (*wfv1.Workflow, error) {
	wf := &wfv1.Workflow{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: req.Workflow.Name}, wf, client.UnsafeDisableDeepCopy); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	if string(wf.UID) != req.Workflow.UID {
		return nil, nil
	}
	return wf, nil
}

// runOf is the incarnation of a workflow's run: status.startedAt, which Argo's controller sets
// once when the workflow starts and which only `argo retry` (util.FormulateRetryWorkflow) sets
// again. A retried node keeps its UID, name and {{retries}}; this is what tells it apart.
func runOf(wf *wfv1.Workflow) string {
	if wf == nil || wf.Status.StartedAt.IsZero() {
		return ""
	}
	return strconv.FormatInt(wf.Status.StartedAt.Unix(), 10)
}

// createdBefore reports whether a TrainJob of this name was created for the step before. What
// persists is the Workflow itself: every reply names the TrainJob in its trainjob-name output and
// the controller copies each reply's outputs onto the node (status.nodes), so a restarted plugin
// still knows. The first reply may not be recorded yet (the agent patches every few seconds), so
// this process also remembers the names it created.
func (p *Plugin) createdBefore(wf *wfv1.Workflow, namespace, name string) bool {
	p.createdMu.Lock()
	_, mine := p.created[types.NamespacedName{Namespace: namespace, Name: name}]
	p.createdMu.Unlock()
	if mine {
		return true
	}
	if wf == nil {
		return false
	}
	for _, n := range wf.Status.Nodes {
		if n.Outputs == nil {
			continue
		}
		for _, o := range n.Outputs.Parameters {
			if o.Name == trainjob.OutName && o.Value != nil && o.Value.String() == name {
				return true
			}
		}
	}
	return false
}

func (p *Plugin) remember(namespace, name string) {
	p.createdMu.Lock()
	defer p.createdMu.Unlock()
	p.created[types.NamespacedName{Namespace: namespace, Name: name}] = struct{}{}
}

// follow looks at the step with the core's lifecycle (which plans and creates its TrainJob on
// the first call) and, while it runs, holds the call open until it finishes, a deadline passes,
// new trouble shows (a change to the TrainJob, its pods, its Events or its Workload wakes it) or
// HoldMax ends, whichever is first. Only MaxHeld calls are held at once; the rest are answered
// at once with a requeue.
func (p *Plugin) follow(ctx context.Context, req *request, s lifecycle.Step, run stepRun) result {
	start := p.clock.Now()
	var changed <-chan struct{}
	var hold <-chan time.Time
	var first string // the message the call was held with
	for {
		var st lifecycle.Status
		if run.found {
			st, run.found = p.engine.LookAt(ctx, s, run.job), false // runIdentity has just found it
		} else {
			st = p.engine.Look(ctx, s)
		}
		if st.Created {
			p.remember(req.Namespace, st.Name)
			p.log.Info("created TrainJob", "workflow", req.Workflow.Namespace+"/"+req.Workflow.Name, "step", req.Key, "attempt", req.Attempt, "trainjob", st.Name)
		}
		if st.Name != "" && st.Reason != lifecycle.ReasonNameTaken {
			s.Recorded = st.Name // gone from now on, it was deleted
		}
		lags := errors.Is(st.Err, lifecycle.ErrCacheLags)
		switch {
		case st.Invalid != nil:
			return p.failed(req, outcomeInvalid, st.Invalid.Error())
		case st.Err != nil && !lags:
			return p.pending(req, st.Name, st.Message)
		case st.Done():
			return p.terminal(req, st, p.clock.Since(start))
		case changed != nil && st.Trouble && st.Message != first:
			// New trouble (a pod that cannot be scheduled, a node failing) is answered at once, so
			// the node says why while it waits rather than at the end of the hold.
			return p.reply(req, st.Observation, p.clock.Since(start))
		}
		if changed == nil {
			first = st.Message
			if p.opts.HoldMax <= 0 || !p.acquire() {
				return p.reply(req, st.Observation, p.clock.Since(start))
			}
			// Each defer below runs once per call: the block is guarded by changed == nil.
			defer p.release() //nolint:gocritic // deferInLoop: guarded, see above
			ch, done := p.waiters.add(types.NamespacedName{Namespace: req.Namespace, Name: st.Name})
			defer done() //nolint:gocritic // deferInLoop: guarded, see above
			changed = ch
			timer := p.clock.NewTimer(p.opts.HoldMax)
			defer timer.Stop() //nolint:gocritic // deferInLoop: guarded, see above
			hold = timer.C()
		}
		if !p.sleep(ctx, changed, hold, st.Wake) {
			return p.reply(req, st.Observation, p.clock.Since(start))
		}
	}
}

// sleep waits for a change or the step's deadline (true: look again), or for the hold or the
// call to end (false: answer in progress). Its deadline timer is stopped on every path.
func (p *Plugin) sleep(ctx context.Context, changed <-chan struct{}, hold <-chan time.Time, deadline time.Time) bool {
	var expire <-chan time.Time
	if !deadline.IsZero() {
		t := p.clock.NewTimer(deadline.Sub(p.clock.Now()))
		defer t.Stop()
		expire = t.C()
	}
	select {
	case <-changed:
		return true
	case <-expire:
		return true
	case <-hold:
		return false
	case <-ctx.Done():
		return false
	}
}

func (p *Plugin) acquire() bool {
	select {
	case p.held <- struct{}{}:
		p.metrics.held.Inc()
		return true
	default:
		p.metrics.holdFull.Inc()
		return false
	}
}

func (p *Plugin) release() {
	<-p.held
	p.metrics.held.Dec()
}

// snapshot is the TrainJob with its pods, Events and Workload, as the caches have them (shallow copies:
// Decide only reads).
func (p *Plugin) snapshot(ctx context.Context, tj *trainer.TrainJob) trainjob.Snapshot {
	s := trainjob.Snapshot{TrainJob: tj, Now: p.clock.Now()}
	pods := &corev1.PodList{}
	if err := p.cache.List(ctx, pods, client.InNamespace(tj.Namespace), client.MatchingFields{trainjob.IndexPodJobSet: tj.Name}, client.UnsafeDisableDeepCopy); err == nil {
		s.Pods = pods.Items
	}
	events := &corev1.EventList{}
	if err := p.cache.List(ctx, events, client.InNamespace(tj.Namespace), client.MatchingFields{trainjob.IndexEventObject: tj.Name}, client.UnsafeDisableDeepCopy); err == nil {
		s.Events = events.Items
	}
	// A queued TrainJob's Workload says, in Kueue's words, why it waits (from an informer, and
	// only while it can change the step: workloads.go).
	s.Workload = p.workloads.of(ctx, tj)
	return s
}

// terminal answers a finished step (the engine read the failing pod's log tail and carried out
// the delete or keep a deadline asks for).
func (p *Plugin) terminal(req *request, st lifecycle.Status, held time.Duration) result {
	switch {
	case st.Deleted:
		p.log.Info("deleted a TrainJob past a deadline", "trainjob", st.Name, "reason", st.Reason)
	case st.Kept:
		p.log.Info("kept a TrainJob past its timeout (keepOnTimeout)", "trainjob", st.Name)
	case st.Released:
		p.log.Info("let go of a TrainJob other steps of its cache key follow", "trainjob", st.Name, "reason", st.Reason)
	}
	r := p.reply(req, st.Observation, held)
	if st.CompletionTime != nil && st.Reason != trainjob.ReasonTimeout && st.Reason != trainjob.ReasonStartTimeout {
		d := p.clock.Since(*st.CompletionTime)
		r.notice = &d
	}
	return r
}

// reply renders an observation: phase, message and every core output as a parameter.
func (p *Plugin) reply(req *request, obs trainjob.Observation, held time.Duration) result {
	phase := nodePhase(obs.Phase)
	msg := obs.Message
	if phase == wfv1.NodeFailed {
		msg = classed(msg, obs.Failure)
	}
	node := &wfv1.NodeResult{Phase: phase, Message: msg, Outputs: outputs(obs, req.Declared), Progress: wfv1.Progress(obs.ProgressFraction())}
	r := result{reply: executor.ExecuteTemplateReply{Node: node}, outcome: string(phase), req: req, trainJob: obs.Name, held: held}
	if phase != wfv1.NodeSucceeded && phase != wfv1.NodeFailed && phase != wfv1.NodeError {
		r.reply.Requeue = &metav1.Duration{Duration: p.opts.Requeue}
	}
	return r
}

// pending is a reply for trouble that may pass (an API error): the agent calls again. With a
// TrainJob name it carries every output, the name among them: the controller replaces the node's
// outputs with the reply's, and the recorded name is how a later call knows the job was made.
func (p *Plugin) pending(req *request, name, msg string) result {
	node := &wfv1.NodeResult{Phase: wfv1.NodePending, Message: msg}
	if name != "" {
		var declared []string
		if req != nil {
			declared = req.Declared
		}
		node.Outputs = outputs(trainjob.Observation{Name: name, Namespace: p.opts.Namespace}, declared)
	}
	return result{
		reply:    executor.ExecuteTemplateReply{Node: node, Requeue: &metav1.Duration{Duration: p.opts.Requeue}},
		outcome:  string(wfv1.NodePending),
		req:      req,
		trainJob: name,
	}
}

// failed ends the step with no requeue: the agent never calls again about it. It fails before
// the lifecycle looked (class invalid: a request or step it refuses; cancelled: the workflow
// stops), so it has no TrainJob; with a parsed request it carries every output all the same.
func (p *Plugin) failed(req *request, outcome, msg string) result {
	f := trainjob.Classified(trainjob.ClassCancelled)
	if outcome == outcomeInvalid {
		f = trainjob.Classified(trainjob.ClassInvalid)
	}
	node := &wfv1.NodeResult{Phase: wfv1.NodeFailed, Message: classed(msg, f)}
	if req != nil {
		obs := trainjob.Observation{Namespace: p.opts.Namespace, Phase: trainjob.PhaseFailed, Message: msg, Failure: f}
		node.Outputs = outputs(obs, req.Declared)
	}
	return result{reply: executor.ExecuteTemplateReply{Node: node}, outcome: outcome, req: req}
}

// classed puts a failure's class first in the node's message, in the outputs' own words
// ("failure-class=oom retryable=true: …"): Argo gives a retryStrategy.expression the last
// attempt's message (lastRetry.message) and, for a plugin node, no exit code of its own, so
// `lastRetry.message matches 'retryable=true'` retries only what a retry can fix.
func classed(msg string, f *trainjob.Failure) string {
	if f == nil {
		return msg
	}
	return fmt.Sprintf("%s=%s %s=%t: %s", trainjob.OutFailureClass, f.Class, trainjob.OutRetryable, f.Retryable, msg)
}

func nodePhase(ph trainjob.Phase) wfv1.NodePhase {
	switch ph {
	case trainjob.PhaseSucceeded:
		return wfv1.NodeSucceeded
	case trainjob.PhaseFailed, trainjob.PhaseTimedOut:
		return wfv1.NodeFailed
	case trainjob.PhaseRunning:
		return wfv1.NodeRunning
	}
	return wfv1.NodePending
}

// outputs returns every core output, in the documented order, then the result-<key> outputs the
// return value has and those the template declares (empty until there is a value): the reply
// replaces the node's outputs, so all of them are always there.
func outputs(obs trainjob.Observation, declared []string) *wfv1.Outputs {
	values := obs.Outputs()
	for _, n := range declared {
		if _, ok := values[n]; !ok {
			values[n] = ""
		}
	}
	out := &wfv1.Outputs{Parameters: make([]wfv1.Parameter, 0, len(values))}
	for _, n := range trainjob.OrderedNames(values) {
		out.Parameters = append(out.Parameters, wfv1.Parameter{Name: n, Value: wfv1.AnyStringPtr(values[n])})
	}
	return out
}
