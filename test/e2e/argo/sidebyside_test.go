package argo_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/test/internal/argoharness"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// BenchmarkSideBySide runs N training steps at once (TRAINSTEP_BENCH_STEPS, default 20) each of
// four ways on this suite's apiserver, one way after the other:
//
//   - way=trainstep: one Workflow of N trainstep plugin steps under Argo's workflow-controller,
//     its agent pod's argoexec and the plugin sidecar run as processes (argoharness.RunAgent);
//   - way=argo-resource: one Workflow of N `resource` steps (action create, successCondition and
//     failureCondition on the TrainJob's conditions, two jsonPath outputs) under the same
//     controller, each step's pod run as processes (argoharness.RunPods: argoexec init, then
//     argoexec emissary running argoexec resource, which polls every 5 s);
//   - way=poll-2s: a process creating N TrainJobs and GETting each every 2 s until terminal (the
//     Kubeflow SDK's wait_for_job_status);
//   - way=watch: the same process following each TrainJob with a client-go watch (the floor).
//
// The Trainer simulator holds every TrainJob running; once all N are running (for the Argo ways:
// all N nodes Running), the benchmark writes the Complete condition to TrainJob i at
// i·10s/N after that instant, spreading the writes over two of argoexec's poll periods so that
// the pollers' phases are sampled evenly. Per way it reports:
//
//   - notice-p50-ms, notice-p99-ms: from the instant before the status write that made the
//     TrainJob terminal to the instant the benchmark's watch on the Workflow saw the step's node
//     in a terminal phase (Argo ways), or to the instant the follower noticed the condition (poll,
//     watch; one wall clock, one machine);
//   - pods/step: pods created for the way (by the controller, from the audit log), ÷ N;
//   - api-requests/step: requests in the apiserver's audit log (one per request) received from
//     the way's start until its processes settled (workflow completed, the controller done with
//     its pods), ÷ N: every request of the way's own identities (the plugin's and the agent's
//     ServiceAccounts; the resource pods' ServiceAccount, kubectl inside argoexec included; the
//     follower's user), plus the workflow-controller's requests in the window (the ways run one
//     after another, one workflow each) but its leases, informer watches and requests about
//     another way's objects (see controllerRequestOf). Not counted: the Trainer simulator,
//     kube-controller-manager, the benchmark's own client and the pod status writes that stand
//     in for a kubelet's (a real kubelet adds about three status writes per pod);
//   - rss-MB/step: RSS sampled when all N are running, of the processes holding the steps, ÷ N:
//     the agent's argoexec plus the plugin (trainstep), every resource pod's argoexec processes
//     (emissary and its argoexec resource child), the follower process (poll, watch).
//
// Run it alone, once: go test ./test/e2e/argo -run '^$' -bench SideBySide -benchtime 1x.
func BenchmarkSideBySide(b *testing.B) {
	n := benchSteps(b)
	follower := buildFollower(b)
	ensureResourceServiceAccount(b)
	ways := []struct {
		name string
		run  func(tb testing.TB, n int) wayResult
	}{
		{"trainstep", runTrainstepWay},
		{"argo-resource", runResourceWay},
		{"poll-2s", func(b testing.TB, n int) wayResult { return runFollowerWay(b, n, follower, "poll") }},
		{"watch", func(b testing.TB, n int) wayResult { return runFollowerWay(b, n, follower, "watch") }},
	}
	for _, w := range ways {
		b.Run("way="+w.name, func(b *testing.B) {
			var total wayResult
			for range b.N {
				total.add(w.run(b, n))
			}
			total.report(b)
		})
	}
}

// TestArgoResourceTemplateRunsAsProcesses: one `resource` step creating a TrainJob, its pod's
// argoexec containers run as processes by argoharness.RunPods; the Trainer simulator completes
// the TrainJob, argoexec's poll (5 s) notices, and the controller marks the node from the pod
// status: Succeeded, with both outputs the template declares.
func TestArgoResourceTemplateRunsAsProcesses(t *testing.T) {
	ensureResourceServiceAccount(t)
	wf := harness.Submit(t, resourceWorkflow(1, "succeed"))
	runner := harness.RunPods(context.WithoutCancel(t.Context()), wf.Name)
	t.Cleanup(func() { assert.NoError(t, runner.Stop()) })

	got := harness.WaitPhase(t, wf.Name, e2eTimeout)
	require.Equal(t, wfv1.WorkflowSucceeded, got.Status.Phase, "%s\n%s", got.Status.Message, argoharness.Nodes(got))
	var node *wfv1.NodeStatus
	for _, n := range got.Status.Nodes {
		if n.TemplateName == "train" {
			node = &n
		}
	}
	require.NotNil(t, node, argoharness.Nodes(got))
	assert.Equal(t, wfv1.NodeTypePod, node.Type)
	name := wf.Name + "-0"
	assert.Equal(t, name, argoharness.Output(node, "trainjob-name"))
	assert.Equal(t, "Complete", argoharness.Output(node, "condition"))

	tj := &trainer.TrainJob{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: Namespace, Name: name}, tj))
	require.NotEmpty(t, tj.OwnerReferences)
	assert.Equal(t, wf.UID, tj.OwnerReferences[0].UID, "setOwnerReference: the Workflow owns the TrainJob")
	runs := runner.Runs()
	require.Len(t, runs, 1, "one pod for the one resource step")
	<-runs[0].Done()
	phase, err := runs[0].Result()
	require.NoError(t, err)
	assert.Equal(t, corev1.PodSucceeded, phase)
}

// TestSideBySideWatchWay runs the benchmark's watch way with one step: the follower process
// creates and watches a TrainJob, notices the terminal write, and the audit log shows its two
// requests.
func TestSideBySideWatchWay(t *testing.T) {
	r := runFollowerWay(t, 1, buildFollower(t), "watch")
	assert.Equal(t, 2, r.requests, "one create and one watch")
	assert.Len(t, r.latencies, 1)
	assert.Zero(t, r.pods)
	assert.Positive(t, r.rssMB)
}

const (
	// benchRuntime is the stock runtime of every TrainJob of the benchmark.
	benchRuntime = "xgboost-distributed"
	// completionSpread is the span over which the N completions are spread: two periods of
	// argoexec's RESOURCE_STATE_CHECK_INTERVAL.
	completionSpread = 10 * time.Second
	// benchTimeout bounds each wait of the benchmark.
	benchTimeout = 3 * time.Minute
	// resourceSA is the ServiceAccount the resource steps' pods run as.
	resourceSA = "trainstep-bench-resource"
	// labelRun and labelStep tie a TrainJob to its way's run and its step index.
	labelRun  = "bench-run"
	labelStep = "bench-step"
)

func benchSteps(tb testing.TB) int {
	tb.Helper()
	s := os.Getenv("TRAINSTEP_BENCH_STEPS")
	if s == "" {
		return 20
	}
	n, err := strconv.Atoi(s)
	require.NoError(tb, err, "TRAINSTEP_BENCH_STEPS")
	require.Positive(tb, n, "TRAINSTEP_BENCH_STEPS")
	return n
}

// trainstepWorkflow is N trainstep plugin steps in parallel, held running by the simulator.
func trainstepWorkflow(n int) string {
	return fmt.Sprintf(`
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: bench-trainstep-}
spec:
  entrypoint: main
  serviceAccountName: trainstep-workflow
  templates:
    - name: main
      steps:
        - - name: train
            template: train
            arguments: {parameters: [{name: i, value: "{{item}}"}]}
            withSequence: {count: "%d"}
    - name: train
      inputs: {parameters: [{name: i}]}
      plugin:
        trainstep:
          key: "{{node.name}}"
          framework: xgboost
          labels: {sim-mode: hold, %s: "{{workflow.name}}", %s: "{{inputs.parameters.i}}"}
          trainer: {numNodes: 1, func: "def train():\n    print('trained')\n"}
`, n, labelRun, labelStep)
}

// resourceWorkflow is N resource steps in parallel, each creating a TrainJob (the simulator's
// mode in its sim-mode label) and waiting on its conditions, as users write it today: the
// condition grammar is a label selector over gjson paths, so it can only test a condition by
// position (the TrainJobs here get no condition before the terminal one).
func resourceWorkflow(n int, mode string) string {
	return fmt.Sprintf(`
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: bench-resource-}
spec:
  entrypoint: main
  serviceAccountName: %[1]s
  templates:
    - name: main
      steps:
        - - name: train
            template: train
            arguments: {parameters: [{name: i, value: "{{item}}"}]}
            withSequence: {count: "%[2]d"}
    - name: train
      inputs: {parameters: [{name: i}]}
      outputs:
        parameters:
          - {name: trainjob-name, valueFrom: {jsonPath: "{.metadata.name}"}}
          - {name: condition, valueFrom: {jsonPath: "{.status.conditions[0].type}"}}
      resource:
        action: create
        setOwnerReference: true
        successCondition: status.conditions.0.type == Complete, status.conditions.0.status == True
        failureCondition: status.conditions.0.type == Failed
        manifest: |
          apiVersion: trainer.kubeflow.org/v1alpha1
          kind: TrainJob
          metadata:
            name: "{{workflow.name}}-{{inputs.parameters.i}}"
            labels: {sim-mode: %[3]s, %[4]s: "{{workflow.name}}", %[5]s: "{{inputs.parameters.i}}"}
          spec:
            runtimeRef: {name: %[6]s}
            trainer:
              numNodes: 1
              command: [python3, -c, "print('trained')"]
`, resourceSA, n, mode, labelRun, labelStep, benchRuntime)
}

// ensureResourceServiceAccount creates the resource pods' ServiceAccount with what Argo's
// resource template needs: create and get the TrainJob, report outputs (WorkflowTaskResults),
// and, for setOwnerReference under OwnerReferencesPermissionEnforcement, update the Workflow's
// finalizers.
func ensureResourceServiceAccount(tb testing.TB) {
	tb.Helper()
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: resourceSA}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: resourceSA}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{trainer.GroupVersion.Group}, Resources: []string{"trainjobs"}, Verbs: []string{"get", "create"}},
			{APIGroups: []string{"argoproj.io"}, Resources: []string{"workflowtaskresults"}, Verbs: []string{"create", "patch"}},
			{APIGroups: []string{"argoproj.io"}, Resources: []string{"workflows/finalizers"}, Verbs: []string{"update"}},
		}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: resourceSA},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: resourceSA},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: Namespace, Name: resourceSA}}},
	} {
		if err := c.Create(tb.Context(), obj); err != nil && !apierrors.IsAlreadyExists(err) {
			require.NoError(tb, err)
		}
	}
}

// wayResult is what one run of a way measured.
type wayResult struct {
	latencies []time.Duration
	steps     int
	pods      int
	requests  int
	rssMB     float64 // sum over the processes holding the steps
}

func (r *wayResult) add(o wayResult) {
	r.latencies = append(r.latencies, o.latencies...)
	r.steps += o.steps
	r.pods += o.pods
	r.requests += o.requests
	r.rssMB += o.rssMB
}

func (r *wayResult) report(b *testing.B) {
	lat := append([]time.Duration(nil), r.latencies...)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ms(percentile(lat, 50)), "notice-p50-ms")
	b.ReportMetric(ms(percentile(lat, 99)), "notice-p99-ms")
	b.ReportMetric(float64(r.pods)/float64(r.steps), "pods/step")
	b.ReportMetric(float64(r.requests)/float64(r.steps), "api-requests/step")
	b.ReportMetric(r.rssMB/float64(r.steps), "rss-MB/step")
}

// percentile is the nearest-rank p-th percentile of sorted values.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p+99)/100 - 1
	return sorted[max(i, 0)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// runTrainstepWay: one workflow of N trainstep steps, its agent run by the harness.
func runTrainstepWay(b testing.TB, n int) wayResult {
	from, offset := auditMark(b)
	wf := harness.Submit(b, trainstepWorkflow(n))
	nodes := watchNodes(b, wf, n)
	harness.RunAgent(b, wf.Name, benchTimeout)
	jobs := waitRunning(b, nodes, wf.Name, n)

	rss := memoryOf(b, harness.AgentPID(wf.Name), harness.PluginPID())
	written := completeSpread(b.Context(), jobs)
	require.NoError(b, written.err)
	noticed := nodes.wait(b)
	res := wayResult{steps: n, rssMB: rss, latencies: latencies(b, from, written.at, noticed)}
	settle(b, wf.Name, nodes)
	res.pods, res.requests = countRequests(b, from, offset, wf.Name,
		"system:serviceaccount:"+Namespace+":trainstep-executor-plugin", "system:serviceaccount:"+Namespace+":trainstep-workflow")
	deleteWorkflow(b, wf)
	return res
}

// runResourceWay: one workflow of N resource steps, each pod's containers run as processes.
func runResourceWay(b testing.TB, n int) wayResult {
	from, offset := auditMark(b)
	wf := harness.Submit(b, resourceWorkflow(n, "hold"))
	nodes := watchNodes(b, wf, n)
	runner := harness.RunPods(context.WithoutCancel(b.Context()), wf.Name)
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			require.NoError(b, runner.Stop())
		}
	}
	b.Cleanup(stop)
	jobs := waitRunning(b, nodes, wf.Name, n)

	runs := runner.Runs()
	require.Len(b, runs, n, "one pod per resource step")
	var pids []int
	for _, r := range runs {
		p := r.PIDs()
		require.NotEmpty(b, p, "pod %s holds no process while its step runs", r.Name)
		pids = append(pids, p...)
	}
	rss := memoryOf(b, pids...)
	written := completeSpread(b.Context(), jobs)
	require.NoError(b, written.err)
	noticed := nodes.wait(b)
	res := wayResult{steps: n, rssMB: rss, latencies: latencies(b, from, written.at, noticed)}
	settle(b, wf.Name, nodes)
	stop()
	res.pods, res.requests = countRequests(b, from, offset, wf.Name, "system:serviceaccount:"+Namespace+":"+resourceSA)
	deleteWorkflow(b, wf)
	return res
}

// runFollowerWay: the follower process creates N TrainJobs and follows them (mode poll or watch).
func runFollowerWay(b testing.TB, n int, bin, mode string) wayResult {
	user := "trainstep-bench-" + mode
	kubeconfig, err := env.UserKubeconfig(user, "system:masters")
	require.NoError(b, err)
	run := fmt.Sprintf("bench-%s-%d", mode, time.Now().UnixNano())
	from, offset := auditMark(b)

	cmd := exec.CommandContext(b.Context(), bin, "--kubeconfig", kubeconfig, "--namespace", Namespace, "--mode", mode,
		"--interval", "2s", "--steps", strconv.Itoa(n), "--prefix", run, "--runtime", benchRuntime,
		"--labels", "sim-mode=hold,"+labelRun+"="+run)
	stdout, err := cmd.StdoutPipe()
	require.NoError(b, err)
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	require.NoError(b, cmd.Start())
	exited := make(chan error, 1)
	lines := make(chan string, 2*n+8) // every line the follower prints: the reader never blocks
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	b.Cleanup(func() {
		// A failed run leaves the follower waiting: end it.
		_ = cmd.Process.Kill()
		deleteTrainJobs(b, run)
	})

	jobs := map[int]string{}
	noticed := map[int]time.Time{}
	var writes chan completions
	rss := 0.0
	deadline := time.After(benchTimeout)
	for done := false; !done; {
		select {
		case line, ok := <-lines:
			if !ok {
				done = true
				break
			}
			f := strings.Fields(line)
			switch {
			case len(f) == 2 && f[0] == "created":
				jobs[stepOf(b, run, f[1])] = f[1]
			case len(f) == 1 && f[0] == "ready":
				// Every TrainJob exists and is followed; like the Argo ways, wait for them to run.
				waitTrainJobsRunning(b, run, n)
				rss = memoryOf(b, cmd.Process.Pid)
				// The writes go on in the background: the follower's lines must be read meanwhile.
				writes = make(chan completions, 1)
				go func() { writes <- completeSpread(b.Context(), maps.Clone(jobs)) }()
			case len(f) == 4 && f[0] == "notice":
				ns, err := strconv.ParseInt(f[2], 10, 64)
				require.NoError(b, err)
				require.Equal(b, "Complete", f[3])
				noticed[stepOf(b, run, f[1])] = time.Unix(0, ns)
			default:
				b.Fatalf("the follower printed %q", line)
			}
		case <-deadline:
			b.Fatalf("the %s follower did not finish in %s: %s", mode, benchTimeout, stderr)
		}
	}
	require.NoError(b, <-exited, "follower: %s", stderr)
	require.NotNil(b, writes, "the follower never said ready")
	w := <-writes
	require.NoError(b, w.err)
	_, requests := countRequests(b, from, offset, "", user)
	return wayResult{steps: n, rssMB: rss, requests: requests, latencies: latencies(b, from, w.at, noticed)}
}

// stepOf is the step index of TrainJob name of the follower's run.
func stepOf(tb testing.TB, run, name string) int {
	tb.Helper()
	i, err := strconv.Atoi(strings.TrimPrefix(name, run+"-"))
	require.NoError(tb, err, "TrainJob %s", name)
	return i
}

// memoryOf is the summed RSS of pids in MB; it logs the split between anonymous memory and mapped
// files (executables).
func memoryOf(tb testing.TB, pids ...int) float64 {
	tb.Helper()
	var sum argoharness.Memory
	for _, pid := range pids {
		m, err := argoharness.MemoryOf(pid)
		require.NoError(tb, err, "pid %d", pid)
		sum = sum.Add(m)
	}
	tb.Logf("%d processes hold the steps: RSS %.1f MB (anonymous %.1f MB, files %.1f MB)", len(pids), sum.RSS, sum.Anon, sum.File)
	return sum.RSS
}

// latencies pairs each step's terminal write with its notice. It logs how long the steps were
// held from the way's start (from): the pollers' requests grow with it.
func latencies(tb testing.TB, from time.Time, written, noticed map[int]time.Time) []time.Duration {
	tb.Helper()
	require.Len(tb, noticed, len(written))
	lat := make([]time.Duration, 0, len(written))
	held := make([]time.Duration, 0, len(written))
	for i, w := range written {
		seen, ok := noticed[i]
		require.True(tb, ok, "step %d was never noticed", i)
		lat = append(lat, seen.Sub(w))
		held = append(held, w.Sub(from))
	}
	sort.Slice(held, func(i, j int) bool { return held[i] < held[j] })
	sorted := append([]time.Duration(nil), lat...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	tb.Logf("%d steps, terminal writes %.1f s to %.1f s after the way's start; notice latencies %v", len(written),
		held[0].Seconds(), held[len(held)-1].Seconds(), roundAll(sorted))
	return lat
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

// auditMark is the start of a way's window in the audit log.
func auditMark(tb testing.TB) (time.Time, int64) {
	tb.Helper()
	off, err := auditSize(auditLog)
	require.NoError(tb, err)
	return time.Now(), off
}

// countRequests reads the way's window of the audit log: the requests of users, plus the
// workflow-controller's about objects named after workflow wfName ("" when the way has none),
// and the pods the controller created for it. It logs a breakdown.
func countRequests(tb testing.TB, from time.Time, offset int64, wfName string, users ...string) (pods, requests int) {
	tb.Helper()
	events, err := readAudit(auditLog, offset, from.Add(-time.Millisecond))
	require.NoError(tb, err)
	byUser := map[string][]auditEvent{}
	var ctrl, ctrlOther []auditEvent
	for _, e := range events {
		switch {
		case strings.Contains(e.UserAgent, "argo-controller"):
			if wfName != "" && controllerRequestOf(e, wfName) {
				ctrl = append(ctrl, e)
				if e.Verb == "create" && e.ObjectRef.Resource == "pods" && e.ObjectRef.Subresource == "" {
					pods++
				}
			} else {
				ctrlOther = append(ctrlOther, e)
			}
		default:
			byUser[e.User.Username] = append(byUser[e.User.Username], e)
		}
	}
	for _, u := range users {
		requests += len(byUser[u])
		tb.Logf("%d requests by %s:\n%s", len(byUser[u]), u, breakdown(byUser[u]))
	}
	requests += len(ctrl)
	if wfName != "" {
		tb.Logf("%d requests by the workflow-controller for %s:\n%s", len(ctrl), wfName, breakdown(ctrl))
		tb.Logf("not counted: %d requests by the workflow-controller in the window (leases, watches, other workflows):\n%s", len(ctrlOther), breakdown(ctrlOther))
	}
	return pods, requests
}

// controllerRequestOf says whether a workflow-controller request in a way's window is on behalf
// of the way's workflow wfName. The ways run one after another, one workflow each, so it is every
// request but leader election (leases), informer watches, and requests about the objects of
// another way's workflow (named after it, as all of a workflow's objects are); the requests
// without such a name are the workflow's lookups (its ServiceAccount and token Secret, ConfigMaps)
// and its label-selected LISTs and DELETECOLLECTIONs.
func controllerRequestOf(e auditEvent, wfName string) bool {
	name := e.name()
	switch {
	case e.Verb == "watch", e.ObjectRef != nil && e.ObjectRef.Resource == "leases":
		return false
	case strings.HasPrefix(name, wfName):
		return true
	}
	return !strings.HasPrefix(name, "bench-")
}

// nodeWatch records, from a watch on one Workflow, when each step's node (by its input i) first
// showed a completed phase.
type nodeWatch struct {
	n    int
	mu   sync.Mutex
	at   map[int]time.Time
	last *wfv1.Workflow
	errc chan error
	full chan struct{}
}

// watchNodes starts watching wf from the version its create returned, so no change is missed.
func watchNodes(tb testing.TB, wf *wfv1.Workflow, n int) *nodeWatch {
	tb.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	require.NoError(tb, err)
	nw := &nodeWatch{n: n, at: map[int]time.Time{}, errc: make(chan error, 1), full: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.WithoutCancel(tb.Context()))
	tb.Cleanup(cancel)
	go func() { nw.errc <- nw.loop(ctx, wc, wf.Name, wf.ResourceVersion) }()
	return nw
}

func (nw *nodeWatch) loop(ctx context.Context, wc client.WithWatch, name, rv string) error {
	for {
		w, err := wc.Watch(ctx, &wfv1.WorkflowList{}, client.InNamespace(Namespace), client.MatchingFields{"metadata.name": name},
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
		if err != nil {
			return err
		}
		for ev := range w.ResultChan() {
			now := time.Now()
			wf, ok := ev.Object.(*wfv1.Workflow)
			if !ok {
				continue
			}
			rv = wf.ResourceVersion
			nw.observe(now, wf)
		}
		w.Stop()
		select {
		case <-ctx.Done():
			return nil // the test is over
		default: // the watch timed out: again from rv
		}
	}
}

func (nw *nodeWatch) observe(now time.Time, wf *wfv1.Workflow) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.last = wf
	for _, node := range wf.Status.Nodes {
		if node.TemplateName != "train" || !node.Phase.Completed() || node.Inputs == nil {
			continue
		}
		for _, p := range node.Inputs.Parameters {
			if p.Name != "i" || p.Value == nil {
				continue
			}
			i, err := strconv.Atoi(p.Value.String())
			if _, seen := nw.at[i]; err == nil && !seen {
				nw.at[i] = now
				if len(nw.at) == nw.n {
					close(nw.full)
				}
			}
		}
	}
}

// workflow is the Workflow as last seen.
func (nw *nodeWatch) workflow() *wfv1.Workflow {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return nw.last
}

// wait returns when every step's node completed, each's instant, after checking all succeeded.
func (nw *nodeWatch) wait(tb testing.TB) map[int]time.Time {
	tb.Helper()
	select {
	case <-nw.full:
	case err := <-nw.errc:
		tb.Fatalf("watching the workflow: %v", err)
	case <-time.After(benchTimeout):
		wf := nw.workflow()
		tb.Fatalf("the steps' nodes did not complete in %s:\n%s", benchTimeout, nodesOf(wf))
	}
	wf := nw.workflow()
	for _, node := range wf.Status.Nodes {
		if node.TemplateName == "train" {
			require.Equal(tb, wfv1.NodeSucceeded, node.Phase, "%s: %s", node.Name, node.Message)
		}
	}
	nw.mu.Lock()
	defer nw.mu.Unlock()
	at := make(map[int]time.Time, len(nw.at))
	for i, t := range nw.at {
		at[i] = t
	}
	return at
}

func nodesOf(wf *wfv1.Workflow) string {
	if wf == nil {
		return "(no workflow seen)"
	}
	return argoharness.Nodes(wf)
}

// runningTrain counts the steps' nodes in phase Running.
func (nw *nodeWatch) runningTrain() int {
	wf := nw.workflow()
	if wf == nil {
		return 0
	}
	k := 0
	for _, node := range wf.Status.Nodes {
		if node.TemplateName == "train" && node.Phase == wfv1.NodeRunning {
			k++
		}
	}
	return k
}

// waitRunning waits until the N steps' nodes are Running and their TrainJobs run (the simulator
// made their pods), and returns the TrainJobs by step.
func waitRunning(tb testing.TB, nw *nodeWatch, run string, n int) map[int]string {
	tb.Helper()
	jobs := waitTrainJobsRunning(tb, run, n)
	require.Eventually(tb, func() bool { return nw.runningTrain() == n }, benchTimeout, testenv.Interval,
		"the %d steps' nodes must be Running", n)
	return jobs
}

// waitTrainJobsRunning waits for the N TrainJobs of run and their pods, and returns them by step.
func waitTrainJobsRunning(tb testing.TB, run string, n int) map[int]string {
	tb.Helper()
	var jobs map[int]string
	require.Eventually(tb, func() bool {
		jobs = map[int]string{}
		l := &trainer.TrainJobList{}
		if c.List(tb.Context(), l, client.InNamespace(Namespace), client.MatchingLabels{labelRun: run}) != nil || len(l.Items) < n {
			return false
		}
		pods := &corev1.PodList{}
		if c.List(tb.Context(), pods, client.InNamespace(Namespace), client.HasLabels{"jobset.sigs.k8s.io/jobset-name"}) != nil {
			return false
		}
		podOf := map[string]bool{}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				podOf[p.Labels["jobset.sigs.k8s.io/jobset-name"]] = true
			}
		}
		for _, tj := range l.Items {
			i, err := strconv.Atoi(tj.Labels[labelStep])
			if err != nil || !podOf[tj.Name] {
				return false
			}
			jobs[i] = tj.Name
		}
		return len(jobs) == n
	}, benchTimeout, testenv.Interval, "the %d TrainJobs of %s must run", n, run)
	return jobs
}

// completions are the instants the terminal writes began, by step.
type completions struct {
	at  map[int]time.Time
	err error
}

// completeSpread writes the Complete condition to TrainJob i at i·completionSpread/N from now,
// each write in its own goroutine, and returns the instant each write began.
func completeSpread(ctx context.Context, jobs map[int]string) completions {
	n := len(jobs)
	t0 := time.Now()
	var mu sync.Mutex
	written := make(map[int]time.Time, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		// The schedule of the experiment, not a synchronisation: write i happens at its instant.
		select {
		case <-ctx.Done():
			return completions{err: ctx.Err()}
		case <-time.After(time.Until(t0.Add(time.Duration(i) * completionSpread / time.Duration(n)))):
		}
		wg.Go(func() {
			w, err := complete(ctx, jobs[i])
			mu.Lock()
			written[i], errs[i] = w, err
			mu.Unlock()
		})
	}
	wg.Wait()
	return completions{at: written, err: errors.Join(errs...)}
}

// complete makes the TrainJob terminal as the Trainer would and returns when the write that did
// it began.
func complete(ctx context.Context, name string) (time.Time, error) {
	var start time.Time
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		tj := &trainer.TrainJob{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: name}, tj); err != nil {
			return err
		}
		apimeta.SetStatusCondition(&tj.Status.Conditions, metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue,
			Reason: "AllJobsCompleted", Message: "jobset completed successfully"})
		start = time.Now()
		return c.Status().Update(ctx, tj)
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("completing TrainJob %s: %w", name, err)
	}
	return start, nil
}

// settle waits for the workflow to complete and the controller to be done with its pods (each
// labelled completed, or deleted as the agent pod is), so that the way's window holds its
// trailing requests.
func settle(tb testing.TB, wfName string, nw *nodeWatch) {
	tb.Helper()
	require.Eventually(tb, func() bool {
		wf := nw.workflow()
		if wf == nil || !wf.Status.Phase.Completed() {
			return false
		}
		pods := &corev1.PodList{}
		if c.List(tb.Context(), pods, client.InNamespace(Namespace), client.MatchingLabels{"workflows.argoproj.io/workflow": wfName}) != nil {
			return false
		}
		for _, p := range pods.Items {
			if p.Labels["workflows.argoproj.io/completed"] != "true" {
				return false
			}
		}
		return true
	}, benchTimeout, testenv.Interval, "workflow %s must complete and its pods be labelled completed", wfName)
	require.Equal(tb, wfv1.WorkflowSucceeded, nw.workflow().Status.Phase, nodesOf(nw.workflow()))
}

func deleteWorkflow(tb testing.TB, wf *wfv1.Workflow) {
	tb.Helper()
	// Its TrainJobs and pods are owned by it: the garbage collector deletes them.
	require.NoError(tb, client.IgnoreNotFound(c.Delete(tb.Context(), wf, client.PropagationPolicy(metav1.DeletePropagationBackground))))
}

func deleteTrainJobs(tb testing.TB, run string) {
	tb.Helper()
	err := c.DeleteAllOf(context.WithoutCancel(tb.Context()), &trainer.TrainJob{}, client.InNamespace(Namespace), client.MatchingLabels{labelRun: run})
	if err != nil {
		tb.Errorf("deleting the TrainJobs of %s: %v", run, err)
	}
}

// buildFollower builds the follower command (./follower) into a temporary directory.
func buildFollower(tb testing.TB) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "follower")
	out, err := exec.CommandContext(tb.Context(), "go", "build", "-o", bin, "github.com/trainstep/trainstep/test/e2e/argo/follower").CombinedOutput()
	require.NoError(tb, err, "building the follower: %s", out)
	return bin
}
