package fault_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/plugin/argo"
	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
	"github.com/trainstep/trainstep/test/internal/argotest"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// soakSteps is how many steps the soak runs across the three faces, soakParallel how many at once.
const (
	soakSteps    = 200
	soakParallel = 12
)

// What a step of the soak does, and so what must be left of it.
const (
	actSucceed = "succeed" // one TrainJob, finished
	actFail    = "fail"    // one TrainJob, finished (failed)
	actCancel  = "cancel"  // stopped while it runs: no TrainJob left
	actReplay  = "replay"  // the same step asked for again and again: one TrainJob
	actRetry   = "retry"   // attempt 0 fails, attempt 1 succeeds: two TrainJobs
)

// expectation is what the census must find of one step.
type expectation struct {
	face, act, owner, key string
	jobs                  int // TrainJobs left, all finished
}

// soak is one run of the soak: the faces it talks to, restartable mid-run.
type soak struct {
	t        *testing.T
	ns       string
	mu       sync.Mutex
	expected []expectation
	// argo is the in-process Argo plugin, replaced on restart.
	argoMu    sync.RWMutex
	argoURL   string
	argoToken string
}

func (s *soak) expect(e expectation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expected = append(s.expected, e)
}

// A soak: 200 steps through the CLI, the Tekton controller and the Argo plugin at once, each
// succeeding, failing, cancelled, replayed or retried at random, while the Tekton controller
// and the Argo plugin are restarted half-way. The census at the end accounts for every TrainJob:
// no duplicate, no orphan, no lost completion.
func TestSoakEveryTrainJobIsAccountedFor(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("SOAK_SEED"); v != "" {
		var err error
		seed, err = strconv.ParseUint(v, 10, 64)
		require.NoError(t, err)
	}
	t.Logf("soak seed %d (SOAK_SEED=%d reproduces the plan)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	s := &soak{t: t, ns: env.Namespace(t)}
	stopTekton := s.startTekton()
	stopArgo := s.startArgo()

	faces := []string{"cli", "tekton", "argo"}
	acts := []string{actSucceed, actFail, actCancel, actReplay, actRetry}
	type plan struct{ face, act string }
	plans := make([]plan, soakSteps)
	for i := range plans {
		plans[i] = plan{faces[i%len(faces)], acts[rng.IntN(len(acts))]}
	}

	sem := make(chan struct{}, soakParallel)
	var wg sync.WaitGroup
	for i, p := range plans {
		if i == soakSteps/2 {
			// Restart the long-running faces with steps in flight.
			wg.Wait()
			stopTekton()
			stopTekton = s.startTekton()
			stopArgo()
			stopArgo = s.startArgo()
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			key := fmt.Sprintf("s%03d", i)
			switch p.face {
			case "cli":
				s.cliStep(key, p.act)
			case "tekton":
				s.tektonStep(key, p.act)
			case "argo":
				s.argoStep(key, p.act)
			}
		}()
	}
	wg.Wait()
	stopTekton()
	stopArgo()
	s.census()
}

// census checks every step's TrainJobs against what its action leaves, and that no TrainJob of
// the namespace is unaccounted for.
func (s *soak) census() {
	t := s.t
	byStep := map[string][]string{}
	unfinished := 0
	for _, tj := range testenv.TrainJobs(t.Context(), t, env.Client, s.ns) {
		k := tj.Annotations[trainjob.AnnotationOwnerUID] + "/" + tj.Annotations[trainjob.AnnotationStepKey]
		byStep[k] = append(byStep[k], tj.Name)
		if conditionTypes(tj) == "" {
			unfinished++
		}
	}
	counts := map[string]int{}
	accounted := 0
	for _, e := range s.expected {
		k := e.owner + "/" + e.key
		got := len(byStep[k])
		accounted += got
		counts[e.face+" "+e.act]++
		assert.Equal(t, e.jobs, got, "%s step %s (%s): TrainJobs %v", e.face, e.key, e.act, byStep[k])
	}
	total := 0
	for _, v := range byStep {
		total += len(v)
	}
	assert.Equal(t, soakSteps, len(s.expected), "every step reported")
	assert.Equal(t, total, accounted, "TrainJobs that belong to no step")
	assert.Zero(t, unfinished, "unfinished (orphaned) TrainJobs")
	t.Logf("census: %d steps %v; %d TrainJobs, all accounted for; %d unfinished", len(s.expected), counts, total, unfinished)
}

// cliStep runs `executor run` as a container step would, and as a retried or replayed pod would.
func (s *soak) cliStep(key, act string) {
	t := s.t
	owner := s.ns // startCLI's --owner-uid
	step := func(fateLabel string) string {
		return fmt.Sprintf("framework: jax\nlabels: {%s: %s}\ntrainer: {func: \"def f(): pass\"}\n", fate, fateLabel)
	}
	run := func(fateLabel string) int { return startCLI(t, env.Kubeconfig, s.ns, key, step(fateLabel)).exit(t) }
	switch act {
	case actSucceed, actFail:
		want := map[string]int{actSucceed: cli.ExitSucceeded, actFail: cli.ExitFailed}[act]
		assert.Equal(t, want, run(act), "cli %s %s", key, act)
		s.expect(expectation{"cli", act, owner, key, 1})
	case actReplay:
		assert.Equal(t, cli.ExitSucceeded, run(actSucceed))
		assert.Equal(t, cli.ExitSucceeded, run(actSucceed), "the replayed pod finds the finished TrainJob")
		s.expect(expectation{"cli", act, owner, key, 1})
	case actRetry:
		r := startCLIAttempt(t, s.ns, key, step("fail-first"), 0)
		assert.Equal(t, cli.ExitFailed, r.exit(t))
		r = startCLIAttempt(t, s.ns, key, step("fail-first"), 1)
		assert.Equal(t, cli.ExitSucceeded, r.exit(t))
		s.expect(expectation{"cli", act, owner, key, 2})
	case actCancel:
		r := startCLI(t, env.Kubeconfig, s.ns, key, step("hold"))
		require.Eventually(t, func() bool { return s.jobsOf(owner, key) == 1 }, createWait, testenv.Interval, "%s: its TrainJob", key)
		r.signal(t, syscall.SIGTERM)
		assert.Equal(t, cli.ExitInterrupts, r.exit(t))
		s.expect(expectation{"cli", act, owner, key, 0})
	}
}

func startCLIAttempt(t *testing.T, ns, key, step string, attempt int) *cliRun {
	t.Helper()
	return startCLI(t, env.Kubeconfig, ns, key, step, "--attempt", strconv.Itoa(attempt))
}

// jobsOf counts a step's TrainJobs by the identity annotations.
func (s *soak) jobsOf(owner, key string) int {
	n := 0
	for _, tj := range testenv.TrainJobs(s.t.Context(), s.t, env.Client, s.ns) {
		if tj.Annotations[trainjob.AnnotationOwnerUID] == owner && tj.Annotations[trainjob.AnnotationStepKey] == key {
			n++
		}
	}
	return n
}

// tektonStep creates a CustomRun, as Tekton's PipelineRun controller would, and acts on it.
func (s *soak) tektonStep(key, act string) {
	t := s.t
	fateLabel, retries := act, 0
	switch act {
	case actCancel, actReplay:
		fateLabel = "hold"
	case actRetry:
		fateLabel, retries = "fail-first", 1
	}
	run := &v1beta1.CustomRun{}
	require.NoError(t, yaml.UnmarshalStrict(fmt.Appendf(nil, `
metadata: {name: %s, namespace: %s}
spec:
  customRef: {apiVersion: trainstep.dev/v1alpha1, kind: TrainStep}
  retries: %d
  params:
  - {name: framework, value: jax}
  - {name: trainer.func, value: "def f(): pass"}
  - {name: labels.%s, value: %s}
`, key, s.ns, retries, fate, fateLabel), run))
	run.APIVersion, run.Kind = v1beta1.GroupVersion.String(), "CustomRun"
	require.NoError(t, c.Create(t.Context(), run))
	run = s.waitRun(key, func(cond *v1beta1.Condition) bool {
		return cond != nil && (cond.Reason == "Running" || cond.Status != corev1.ConditionUnknown)
	})
	owner := string(run.UID)
	switch act {
	case actSucceed, actRetry:
		got := s.waitRun(key, terminal)
		assert.Equal(t, corev1.ConditionTrue, got.Status.Succeeded().Status, "tekton %s %s: %s", key, act, got.Status.Succeeded().Message)
		s.expect(expectation{"tekton", act, owner, key, map[string]int{actSucceed: 1, actRetry: 2}[act]})
	case actFail:
		got := s.waitRun(key, terminal)
		assert.Equal(t, corev1.ConditionFalse, got.Status.Succeeded().Status)
		s.expect(expectation{"tekton", act, owner, key, 1})
	case actReplay:
		// The same run reconciled again and again (and across the restart): one TrainJob, which
		// the test then finishes.
		require.Eventually(t, func() bool { return s.jobsOf(owner, key) == 1 }, createWait, testenv.Interval, "%s: its TrainJob", key)
		for _, tj := range testenv.TrainJobs(t.Context(), t, env.Client, s.ns) {
			if tj.Annotations[trainjob.AnnotationOwnerUID] == owner {
				require.NoError(t, sim.Finish(t.Context(), s.ns, tj.Name, succeed))
			}
		}
		got := s.waitRun(key, terminal)
		assert.Equal(t, corev1.ConditionTrue, got.Status.Succeeded().Status)
		s.expect(expectation{"tekton", act, owner, key, 1})
	case actCancel:
		require.Eventually(t, func() bool { return s.jobsOf(owner, key) == 1 }, createWait, testenv.Interval, "%s: its TrainJob", key)
		patch := client.RawPatch("application/json-patch+json", []byte(`[{"op":"add","path":"/spec/status","value":"RunCancelled"}]`))
		require.NoError(t, c.Patch(t.Context(), run, patch))
		got := s.waitRun(key, terminal)
		assert.Equal(t, corev1.ConditionFalse, got.Status.Succeeded().Status)
		require.Eventually(t, func() bool { return s.jobsOf(owner, key) == 0 }, testenv.Timeout, testenv.Interval)
		s.expect(expectation{"tekton", act, owner, key, 0})
	}
}

func terminal(cond *v1beta1.Condition) bool {
	return cond != nil && cond.Status != corev1.ConditionUnknown
}

func (s *soak) waitRun(name string, done func(*v1beta1.Condition) bool) *v1beta1.CustomRun {
	run := &v1beta1.CustomRun{}
	require.Eventually(s.t, func() bool {
		return c.Get(s.t.Context(), client.ObjectKey{Namespace: s.ns, Name: name}, run) == nil && done(run.Status.Succeeded())
	}, 3*testenv.Timeout, testenv.Interval, "CustomRun %s", name)
	return run
}

// argoStep calls the plugin as Argo's agent does, requeue after requeue, for a Workflow of its own.
func (s *soak) argoStep(key, act string) {
	t := s.t
	wf := &wfv1.Workflow{}
	wf.Namespace, wf.Name = s.ns, "wf-"+key
	wf.Spec.Entrypoint = "main"
	startedByArgo(wf)
	require.NoError(t, c.Create(t.Context(), wf))
	owner := string(wf.UID)
	call := func(fateLabel string, attempt int) (*wfv1.NodeResult, error) {
		args, err := argotest.Args(wf.Name, s.ns, owner, fmt.Sprintf("key: %s\nattempt: %q\nframework: jax\nlabels: {%s: %s}\ntrainer: {func: \"def f(): pass\"}\n",
			key, strconv.Itoa(attempt), fate, fateLabel), argotest.WithRetry(1))
		if err != nil {
			return nil, err
		}
		s.argoMu.RLock()
		url, token := s.argoURL, s.argoToken
		s.argoMu.RUnlock()
		r, err := argotest.Execute(t.Context(), url, token, args)
		if err != nil {
			return nil, err
		}
		return r.Node, nil
	}
	// until calls until the node's phase is final, as the agent does on every requeue.
	until := func(fateLabel string, attempt int) wfv1.NodePhase {
		var phase wfv1.NodePhase
		require.Eventually(t, func() bool {
			n, err := call(fateLabel, attempt)
			if err != nil || n == nil {
				return false // a restarting plugin: the agent calls again
			}
			phase = n.Phase
			return phase.Fulfilled(nil)
		}, 3*testenv.Timeout, testenv.Interval, "argo %s", key)
		return phase
	}
	switch act {
	case actSucceed:
		assert.Equal(t, wfv1.NodeSucceeded, until(actSucceed, 0))
		s.expect(expectation{"argo", act, owner, key, 1})
	case actFail:
		assert.Equal(t, wfv1.NodeFailed, until(actFail, 0))
		s.expect(expectation{"argo", act, owner, key, 1})
	case actReplay:
		var wg sync.WaitGroup
		for range 5 {
			wg.Add(1)
			go func() { defer wg.Done(); _, _ = call(actSucceed, 0) }()
		}
		wg.Wait()
		assert.Equal(t, wfv1.NodeSucceeded, until(actSucceed, 0))
		s.expect(expectation{"argo", act, owner, key, 1})
	case actRetry:
		assert.Equal(t, wfv1.NodeFailed, until("fail-first", 0))
		assert.Equal(t, wfv1.NodeSucceeded, until("fail-first", 1))
		s.expect(expectation{"argo", act, owner, key, 2})
	case actCancel:
		require.Eventually(t, func() bool {
			_, err := call("hold", 0)
			return err == nil && s.jobsOf(owner, key) == 1
		}, testenv.Timeout, testenv.Interval)
		cur := &wfv1.Workflow{}
		require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(wf), cur))
		cur.Spec.Shutdown = wfv1.ShutdownStrategyStop
		require.NoError(t, c.Update(t.Context(), cur))
		// The reaper's queue, rate-limited, and an apiserver that make test's other suites keep busy
		// can take longer than testenv.Timeout: twice under full load a stop was reaped after it.
		// The soak counts that every job is accounted for, not how fast.
		require.Eventually(t, func() bool { return s.jobsOf(owner, key) == 0 }, reapWait, testenv.Interval, "argo %s: stopped", key)
		s.expect(expectation{"argo", act, owner, key, 0})
	}
}

// reapWait bounds the wait for the Argo reaper to delete a stopped Workflow's TrainJob.
const reapWait = 2 * time.Minute

// createWait bounds the wait for a step about to be cancelled to create its TrainJob: an
// `executor run` process starting, listing and planning beside eleven others took over
// testenv's 30 s under make test's full load (5 of 14 once, 7 Dec); the soak counts jobs, not
// time.
const createWait = 2 * time.Minute

// startArgo runs the Argo plugin in this process on a free port; the returned func stops it.
func (s *soak) startArgo() func() {
	t := s.t
	token := uuid.NewString()
	file := t.TempDir() + "/token"
	require.NoError(t, os.WriteFile(file, []byte(token), 0o440))
	p, err := argo.New(env.Config, argo.Options{TokenFile: file, Namespace: s.ns, HoldMax: 2 * time.Second, Requeue: time.Second, Logs: sim.Logs,
		MetricsAddr: argo.MetricsOff})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln) }()
	s.argoMu.Lock()
	s.argoURL, s.argoToken = "http://"+ln.Addr().String(), token
	s.argoMu.Unlock()
	require.Eventually(t, func() bool { return ready(s.argoURL + "/readyz") }, testenv.Timeout, testenv.Interval)
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the Argo plugin stopped with an error: %v", err)
		}
	}
}

// startTekton runs the Tekton controller in this process; the returned func stops it.
func (s *soak) startTekton() func() {
	ctx, cancel := context.WithCancel(context.WithoutCancel(s.t.Context()))
	stopped := startTektonUntil(ctx, s.t, env.Config, s.ns)
	return func() {
		cancel()
		<-stopped
	}
}
