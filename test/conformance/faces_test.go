package conformance_test

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/google/uuid"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	stepspec "github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
	"github.com/trainstep/trainstep/test/internal/argoharness"
	"github.com/trainstep/trainstep/test/internal/previous"
	"github.com/trainstep/trainstep/test/internal/realstack"
	"github.com/trainstep/trainstep/test/internal/tektonharness"
)

// Waits poll with these bounds; nothing sleeps to synchronise. Generous: the stack, Argo,
// Tekton and every face share 2 cores, and kwok's stages have delays of a few seconds each.
const (
	timeout  = 4 * time.Minute
	interval = 200 * time.Millisecond
)

// stopped is the phase of a step its engine stopped (an interrupt, a stopped workflow, a
// cancelled run): the core reports no TrainJob phase for it (lifecycle.Status.Stopped).
const stopped = "Stopped"

// A face runs a scenario's step through one way of running trainstep and reports how it ended
// in the core's terms.
type face interface {
	name() string
	run(t *testing.T, sc scenario) result
}

// result is how a step ended, translated from what the face shows into the core's terms.
type result struct {
	// phase is the core's (Succeeded, Failed, TimedOut) or stopped; reason and message the
	// core's reason and message as the face carries them; outputs the step's outputs.
	phase, reason, message string
	outputs                map[string]string
	// waiting is what the face said while the step ran, one message a line.
	waiting string
	// step is the running step the scenario acted on, to look at its TrainJob afterwards.
	step *running
}

// running is a step a face has started: where its TrainJob lives and how the face stops it.
type running struct {
	ns string
	// queue is the step's Kueue LocalQueue ("" when it has none).
	queue string
	// selector tells this step's TrainJobs from others of ns (Argo's shared namespace).
	selector client.MatchingLabels
	stop     func(t *testing.T)
	// job is the step's TrainJob as an action last saw it (nil when none looked).
	job *trainer.TrainJob
	// node is the step's own Node (stack.PrivateNode; "" when it has none).
	node string
	// deny is the step's denyLabel value ("" when nothing denies it).
	deny string
	// previous is the TrainJob the release before this one made for the step (createPrevious; ""
	// when none).
	previous string

	// owner is the step's owner UID (trainjob.LabelOwnerUID) on its TrainJobs: the CLI's
	// --owner-uid, the Workflow's, the CustomRun's; made records every TrainJob of the namespace.
	owner string
	made  *madeTrainJobs

	mu    sync.Mutex
	heard []string // what the face said while the step ran, each message once, in order
}

// hear keeps, until the test ends, every new message listen reads from the face (what it says
// now about the running step): what a face says while an action acts would be gone by the time
// the step ends.
func (r *running) hear(t *testing.T, listen func(ctx context.Context) []string) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
	})
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			r.keep(listen(ctx))
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

func (r *running) keep(msgs []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		if m != "" && !slices.Contains(r.heard, m) {
			r.heard = append(r.heard, m)
		}
	}
}

// said is what the face said while the step ran, one message a line.
func (r *running) said() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.heard, "\n")
}

// waitSaid waits until the face said something matching the regexp pattern and returns it.
func (r *running) waitSaid(t *testing.T, pattern string) string {
	t.Helper()
	re := regexp.MustCompile(pattern)
	var got string
	ok := assert.Eventually(t, func() bool {
		got = re.FindString(r.said())
		return got != ""
	}, timeout, interval)
	require.True(t, ok, "the face must say %q; it said:\n%s", pattern, r.said())
	return got
}

// trainJobs lists the step's TrainJobs: those trainstep made (not a scenario's blocker) that
// match the face's selector.
func (r *running) trainJobs(t *testing.T) []trainer.TrainJob {
	t.Helper()
	l := &trainer.TrainJobList{}
	selector := client.MatchingLabels{trainjob.LabelManagedBy: trainjob.ManagedByValue}
	maps.Copy(selector, r.selector)
	require.NoError(t, stack.Client.List(t.Context(), l, client.InNamespace(r.ns), selector))
	return l.Items
}

// inFlight waits until a TrainJob exists in namespace ns: an earlier run's, which trains
// alongside the checked one (scenario.alongside).
func inFlight(t *testing.T, ns string) {
	t.Helper()
	require.Eventually(t, func() bool {
		l := &trainer.TrainJobList{}
		return stack.Client.List(t.Context(), l, client.InNamespace(ns)) == nil && len(l.Items) > 0
	}, timeout, interval, "the earlier run must create its TrainJob")
}

// started waits until the step's face has recorded its TrainJob's start (so the face knows the
// job as its own) and returns the TrainJob.
func (r *running) started(t *testing.T) *trainer.TrainJob {
	t.Helper()
	var tj *trainer.TrainJob
	require.Eventually(t, func() bool {
		for _, j := range r.trainJobs(t) {
			if _, ok := j.Annotations[trainjob.AnnotationStartedAt]; ok {
				tj = &j
				return true
			}
		}
		return false
	}, timeout, interval, "the step's TrainJob must start")
	return tj
}

var faces = []face{cliFace{}, argoFace{}, tektonFace{}}

// cliFace is `executor run`, the real binary, as a pipeline step runs it: the step in a file,
// the outputs one file each in --output-dir, the end in the exit code.
type cliFace struct{}

func (cliFace) name() string { return "cli" }

func (cliFace) run(t *testing.T, sc scenario) result {
	r := &running{ns: stack.Namespace(t)}
	step := sc.prepare(t, r)
	earlierEnded := func(*testing.T) {}
	if sc.earlier != nil {
		first := stack.StartExecutor(t, bin, r.ns, sc.earlier(step), timeout, "--owner-uid", uuid.NewString(), "--step-key", cliStepKey)
		earlierEnded = func(t *testing.T) {
			res := first.Result(t)
			t.Logf("first run: exit %d; stderr:\n%s", res.Code, res.Stderr)
			if sc.alongside {
				assert.Equal(t, cli.ExitSucceeded, res.Code, "the earlier run")
			}
		}
		if sc.alongside {
			inFlight(t, r.ns)
		} else {
			earlierEnded(t)
			earlierEnded = func(*testing.T) {}
		}
	}
	defer func() { earlierEnded(t) }()
	owner := uuid.NewString() // the pipeline run's, the same for every attempt
	r.owner = owner
	if sc.upgrade {
		createPrevious(t, r, previous.Identity{Engine: "cli", OwnerUID: owner, StepKey: cliStepKey}, nil, step)
	}
	var res realstack.ExecutorResult
	for attempt := 0; ; attempt++ {
		e := stack.StartExecutor(t, bin, r.ns, step, timeout, "--owner-uid", owner, "--step-key", cliStepKey, "--attempt", strconv.Itoa(attempt))
		r.stop = func(t *testing.T) { e.Signal(t, syscall.SIGTERM) }
		if attempt == 0 {
			r.hear(t, func(context.Context) []string { return cliWaiting(e.Stderr.String()) })
			sc.act(t, r)
		}
		res = e.Result(t)
		t.Logf("attempt %d: exit %d; stderr:\n%s", attempt, res.Code, res.Stderr)
		if res.Code != cli.ExitFailed || attempt == sc.retries {
			break
		}
	}
	phases := map[int]string{cli.ExitSucceeded: "Succeeded", cli.ExitFailed: "Failed", cli.ExitTimedOut: "TimedOut", cli.ExitInterrupts: stopped}
	phase, ok := phases[res.Code]
	require.True(t, ok, "exit code %d is none of a step's ends; stderr:\n%s", res.Code, res.Stderr)
	return result{phase: phase, reason: res.Outputs[trainjob.OutReason], message: res.Outputs[trainjob.OutMessage], outputs: res.Outputs,
		waiting: strings.Join(cliWaiting(res.Stderr), "\n"), step: r}
}

// cliStepKey is the --step-key of every step the CLI face runs: an Argo DAG node's name, as the
// docs/cli.md's container-step recipe passes "{{node.name}}" (the release before 1 Dec 2026 cut such a
// key differently in the TrainJob's name).
const cliStepKey = "train-dag-x7k2p.train-model"

// cliWaiting is the status lines the executor wrote while the step had not ended.
func cliWaiting(stderr string) []string {
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		for _, p := range []string{"Pending", "Suspended", "Running"} {
			if strings.HasPrefix(l, "trainstep: "+p+": ") {
				lines = append(lines, l)
			}
		}
	}
	return lines
}

// argoFace is the executor plugin under Argo's own workflow-controller and agent: a one-step
// Workflow, the end in the plugin node's phase, message and output parameters.
type argoFace struct{}

func (argoFace) name() string { return "argo" }

// argoOutputs are the output parameters a scenario's Workflow declares: every core output and
// the result keys the scenarios return.
var argoOutputs = append(append([]string{}, trainjob.OutputNames...), "result-loss", "result-model_uri", "result-epochs")

// declaredOutputs are argoOutputs, the resume outputs for a step with a checkpoint block and the
// cache outputs for one with a cache block (the plugin refuses them for one without).
func declaredOutputs(t *testing.T, doc string) []string {
	s, err := stepspec.Parse([]byte(doc))
	require.NoError(t, err)
	out := slices.Clone(argoOutputs)
	if s.Checkpoint != nil {
		out = append(out, trainjob.ResumeOutputNames...)
	}
	if s.Cache != nil {
		out = append(out, trainjob.CacheOutputNames...)
	}
	return out
}

// argoSlots bounds the Argo face's steps at once. Each runs its own agent and plugin sidecar (a
// process that lists and watches the namespace's Workflows and TrainJobs). With every scenario's
// Argo step at once beside the other faces' steps, the stack's controllers and kwok fell minutes
// behind on 2 cores (an initializer's and a lost node's failure not seen within 3m). Four at a
// time passed alone, but beside make test's other suites (with the Argo suites' machine-wide
// lock removed too) two rows fell behind; two at a time keeps the load near what one had.
var argoSlots = make(chan struct{}, 2)

func (argoFace) run(t *testing.T, sc scenario) result {
	argoSlots <- struct{}{}
	// Registered first, so it runs last: after this step's agent and sidecar stopped.
	t.Cleanup(func() { <-argoSlots })
	// Argo's controller and plugin watch one namespace; the Workflow owns its TrainJob there.
	r := &running{ns: argoharness.Namespace}
	step := sc.prepare(t, r)
	if sc.earlier != nil {
		// A subtest, so its agent and sidecar stop when its Workflow ended.
		t.Run("first run", func(t *testing.T) { argoWorkflow(t, scenario{}, &running{ns: r.ns}, sc.earlier(step)) })
	}
	return argoWorkflow(t, sc, r, step)
}

// argoWorkflow runs step as a one-step Workflow, under an agent and a plugin sidecar of its own
// (argoharness.RunAgentWithSidecar: the Workflows of the table run side by side), to its end.
func argoWorkflow(t *testing.T, sc scenario, r *running, step string) result {
	declared := declaredOutputs(t, step)
	wf := argo.Submit(t, argoharness.RetriedStepWorkflow("conformance", step, sc.retries, declared...))
	t.Cleanup(func() { _ = argo.Client.Delete(context.Background(), wf) })
	if sc.upgrade {
		argoPrevious(t, r, wf.Name, step)
	}
	argo.RunAgentWithSidecar(t, wf.Name, timeout)
	r.selector = client.MatchingLabels{trainjob.LabelOwnerUID: string(wf.UID)}
	r.owner = string(wf.UID)
	r.stop = func(t *testing.T) { stopWorkflow(t, wf.Name) }
	r.hear(t, func(ctx context.Context) []string {
		cur, err := argo.Get(ctx, wf.Name)
		if err != nil {
			return nil
		}
		if n := argoharness.PluginNode(cur); n != nil && !n.Fulfilled() {
			return []string{n.Message}
		}
		return nil
	})
	sc.act(t, r)
	got := waitWorkflow(t, wf.Name)
	node := argoharness.PluginNode(got)
	require.NotNil(t, node, argoharness.Nodes(got))
	t.Logf("workflow %s %s: %s\n%s", got.Name, got.Status.Phase, got.Status.Message, argoharness.Nodes(got))
	outs := map[string]string{}
	for _, o := range declared {
		outs[o] = argoharness.Output(node, o)
	}
	phase := outs[trainjob.OutPhase]
	switch {
	case got.Spec.Shutdown != "":
		phase = stopped
	case node.Phase == wfv1.NodeSucceeded:
		phase = "Succeeded"
	}
	return result{phase: phase, reason: outs[trainjob.OutReason], message: argoMessage(t, node, outs), outputs: outs, waiting: r.said(), step: r}
}

// argoMessage is a plugin node's message in the core's terms: a failed node's begins with its
// class, as its outputs say it, for a retryStrategy.expression (lastRetry.message).
func argoMessage(t *testing.T, node *wfv1.NodeStatus, outs map[string]string) string {
	if node.Phase != wfv1.NodeFailed || outs[trainjob.OutFailureClass] == "" {
		return node.Message
	}
	prefix := fmt.Sprintf("%s=%s %s=%s: ", trainjob.OutFailureClass, outs[trainjob.OutFailureClass], trainjob.OutRetryable, outs[trainjob.OutRetryable])
	msg, ok := strings.CutPrefix(node.Message, prefix)
	assert.True(t, ok, "a failed node's message begins %q: %s", prefix, node.Message)
	return msg
}

// argoPrevious creates the TrainJob the previous release's plugin made for Workflow name's step,
// owned by the Workflow, once Argo's controller made the plugin node and before an agent calls
// this release's plugin.
func argoPrevious(t *testing.T, r *running, name, step string) {
	var (
		wf   *wfv1.Workflow
		node *wfv1.NodeStatus
	)
	require.Eventually(t, func() bool {
		cur, err := argo.Get(t.Context(), name)
		if err != nil || cur.Status.StartedAt.IsZero() {
			return false
		}
		wf, node = cur, argoharness.PluginNode(cur)
		return node != nil
	}, timeout, interval, "Argo must make the plugin node")
	createPrevious(t, r, previous.Identity{Engine: "argo", OwnerUID: string(wf.UID), StepKey: node.Name},
		&metav1.OwnerReference{APIVersion: wfv1.SchemeGroupVersion.String(), Kind: "Workflow", Name: wf.Name, UID: wf.UID}, step)
}

// waitWorkflow waits for Workflow name to complete and returns it.
func waitWorkflow(t *testing.T, name string) *wfv1.Workflow {
	t.Helper()
	var wf *wfv1.Workflow
	require.Eventually(t, func() bool {
		cur, err := argo.Get(t.Context(), name)
		if err != nil {
			return false
		}
		wf = cur
		return cur.Status.Phase.Completed()
	}, timeout, interval, "workflow %s did not finish", name)
	return wf
}

// stopWorkflow is `argo stop`: the Workflow's shutdown strategy set to Stop.
func stopWorkflow(t *testing.T, name string) {
	t.Helper()
	cur, err := argo.Get(t.Context(), name)
	require.NoError(t, err)
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.Shutdown = wfv1.ShutdownStrategyStop
	require.NoError(t, argo.Client.Patch(t.Context(), cur, patch))
}

// tektonFace is trainstep's Tekton controller under Tekton's own: a PipelineRun of one trainstep
// task, the end in its CustomRun's Succeeded condition (reason, message) and results.
type tektonFace struct{}

func (tektonFace) name() string { return "tekton" }

func (tektonFace) run(t *testing.T, sc scenario) result {
	ns := stack.Namespace(t)
	r := &running{ns: ns}
	step := sc.prepare(t, r)
	earlierEnded := func(t *testing.T) {
		first := finishedCustomRun(t, ns, "first").Status.Succeeded()
		t.Logf("first run: CustomRun %s %s: %s", first.Status, first.Reason, first.Message)
		if sc.alongside {
			assert.Equal(t, corev1.ConditionTrue, first.Status, "the earlier run")
		}
	}
	if sc.earlier != nil {
		tektonharness.CreateRetriedStepPipelineRun(t, tk.Client, ns, "first", sc.earlier(step), 0)
		if sc.alongside {
			inFlight(t, ns)
			defer earlierEnded(t)
		} else {
			earlierEnded(t)
		}
	}
	tektonharness.CreateRetriedStepPipelineRun(t, tk.Client, ns, "run", step, sc.retries)
	r.stop = func(t *testing.T) { cancelPipelineRun(t, ns, "run") }
	r.hear(t, func(ctx context.Context) []string {
		runs := &v1beta1.CustomRunList{}
		if err := tk.Client.List(ctx, runs, client.InNamespace(ns), client.MatchingLabels{tektonPipelineRunLabel: "run"}); err != nil || len(runs.Items) != 1 {
			return nil
		}
		if cond := runs.Items[0].Status.Succeeded(); cond != nil && cond.Status == corev1.ConditionUnknown {
			return []string{cond.Message}
		}
		return nil
	})
	sc.act(t, r)
	run := finishedCustomRun(t, ns, "run")
	r.owner = string(run.UID)
	cond := run.Status.Succeeded()
	t.Logf("CustomRun %s %s: %s", cond.Status, cond.Reason, cond.Message)
	return result{phase: tektonPhase(run), reason: tektonReason(cond.Reason), message: cond.Message, outputs: tektonOutputs(run),
		waiting: r.said(), step: r}
}

// tektonPhase is the core's phase of a finished CustomRun: its Succeeded condition's status, and
// its reason for the ends the core names (plugin/tekton/README.md, "Status, cancel, timeout").
func tektonPhase(run *v1beta1.CustomRun) string {
	cond := run.Status.Succeeded()
	switch {
	case run.IsCancelled():
		return stopped
	case cond.Status == corev1.ConditionTrue:
		return "Succeeded"
	case cond.Reason == tekton.ReasonTimedOut:
		return "TimedOut"
	}
	return "Failed"
}

// tektonReason is the core's reason of a CustomRun's: a timeout is Tekton's CustomRunTimedOut
// there, as Tekton's own controller names a run's.
func tektonReason(reason string) string {
	if reason == tekton.ReasonTimedOut {
		return trainjob.ReasonTimeout
	}
	return reason
}

// tektonOutputs are a CustomRun's results, what its PipelineRun passes on: it has them once an
// attempt ended, and none when it was cancelled before (the TrainJob's name in its
// status.extraFields is trainstep's record, not a result).
func tektonOutputs(run *v1beta1.CustomRun) map[string]string {
	outs := map[string]string{}
	for _, res := range run.Status.Results {
		outs[res.Name] = res.Value
	}
	return outs
}

// tektonPipelineRunLabel is the label Tekton gives the CustomRuns of a PipelineRun, its name.
const tektonPipelineRunLabel = "tekton.dev/pipelineRun"

// finishedCustomRun waits for the one CustomRun of PipelineRun ns/pipelineRun to finish and
// returns it.
func finishedCustomRun(t *testing.T, ns, pipelineRun string) *v1beta1.CustomRun {
	t.Helper()
	var run *v1beta1.CustomRun
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var runs []v1beta1.CustomRun
		for _, r := range tektonharness.CustomRuns(ct, t, tk.Client, ns) {
			if r.Labels[tektonPipelineRunLabel] == pipelineRun {
				runs = append(runs, r)
			}
		}
		require.Len(ct, runs, 1)
		run = &runs[0]
		cond := run.Status.Succeeded()
		require.NotNil(ct, cond)
		assert.NotEqual(ct, corev1.ConditionUnknown, cond.Status)
	}, timeout, interval, "the CustomRun must finish")
	return run
}

// cancelPipelineRun cancels PipelineRun ns/name as `tkn pipelinerun cancel` does, once Tekton
// has recorded its CustomRun (it cancels only the children in status.childReferences).
func cancelPipelineRun(t *testing.T, ns, name string) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		refs, _, _ := unstructured.NestedSlice(tektonharness.GetPipelineRun(ct, t, tk.Client, ns, name).Object, "status", "childReferences")
		assert.Len(ct, refs, 1)
	}, timeout, interval)
	pr := tektonharness.GetPipelineRun(t, t, tk.Client, ns, name)
	require.NoError(t, tk.Client.Patch(t.Context(), pr, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"status":"Cancelled"}}`))))
}
