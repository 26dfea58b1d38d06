package core_test

import (
	"sync"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/lifecycle"
	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/testenv"
	"github.com/trainstep/trainstep/test/internal/trainersim"
)

// recorder keeps every observation a wait reported, for asserting the sequence of phases.
type recorder struct {
	mu    sync.Mutex
	seen  []trainjob.Observation
	phase chan trainjob.Phase
}

func newRecorder() *recorder { return &recorder{phase: make(chan trainjob.Phase, 64)} }

func (r *recorder) on(o trainjob.Observation) {
	r.mu.Lock()
	r.seen = append(r.seen, o)
	r.mu.Unlock()
	r.phase <- o.Phase
}

func (r *recorder) phases() []trainjob.Phase {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []trainjob.Phase
	for _, o := range r.seen {
		if len(out) == 0 || out[len(out)-1] != o.Phase {
			out = append(out, o.Phase)
		}
	}
	return out
}

// awaitPhase blocks until the wait reports the phase, or fails at the deadline.
func (r *recorder) awaitPhase(t *testing.T, want trainjob.Phase) {
	t.Helper()
	deadline := time.After(testenv.Timeout)
	for {
		select {
		case p := <-r.phase:
			if p == want {
				return
			}
		case <-deadline:
			t.Fatalf("the wait never reported %s; saw %v", want, r.phases())
		}
	}
}

type waitResult struct {
	obs trainjob.Observation
	st  lifecycle.Status
	err error
}

// startRun runs the step y (whose TrainJob submit made) with the core's lifecycle until it ends.
func startRun(t *testing.T, ns, y string, d trainjob.Deadlines, onChange func(trainjob.Observation)) <-chan waitResult {
	done := make(chan waitResult, 1)
	s := lifecycle.Step{Spec: parse(t, y), Namespace: ns, Identity: identity(t, "train"), Deadlines: d}
	go func() {
		st, err := runner().Run(t.Context(), s, lifecycle.RunOptions{OnChange: func(st lifecycle.Status) {
			if onChange != nil {
				onChange(st.Observation)
			}
		}})
		done <- waitResult{st.Observation, st, err}
	}()
	return done
}

func result(t *testing.T, done <-chan waitResult) waitResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(testenv.Timeout):
		t.Fatal("the wait did not return")
	}
	return waitResult{}
}

// The trainer command really runs (local backend, two nodes); the wait sees it complete.
func TestCompleteWithRealTrainerCommand(t *testing.T) {
	ns := env.Namespace(t)
	y := `
framework: xgboost
trainer:
  numNodes: 2
  funcArgs: {greeting: "hello $USER ` + "`x`" + `"}
  func: |
    def train(greeting):
        import os
        print(greeting, "from", os.environ["DMLC_TASK_ID"], "of", os.environ["DMLC_NUM_WORKER"])
`
	_, tj := submit(t, ns, y)
	rec := newRecorder()
	r := result(t, startRun(t, ns, y, trainjob.Deadlines{}, rec.on))
	require.NoError(t, r.err)
	assert.Equal(t, trainjob.PhaseSucceeded, r.obs.Phase)
	assert.Equal(t, "AllJobsCompleted", r.obs.Reason)
	out := r.obs.Outputs()
	assert.Equal(t, tj.Name, out[trainjob.OutName])
	assert.Equal(t, ns, out[trainjob.OutNamespace])
	assert.Equal(t, "xgboost-distributed", out[trainjob.OutRuntime])
	assert.Equal(t, "xgboost", out[trainjob.OutFramework])
	assert.Equal(t, "2", out[trainjob.OutNumNodes])
	assert.NotEmpty(t, out[trainjob.OutCompletionTime])
	tail, err := sim.Logs.Tail(t.Context(), ns, trainersim.PodName(tj.Name, 1), "node", 5)
	require.NoError(t, err)
	assert.Contains(t, tail, "hello $USER `x` from 1 of 2")
}

func TestFailureCarriesTheLogTail(t *testing.T) {
	ns := env.Namespace(t)
	y := `
framework: jax
trainer:
  func: |
    def train():
        print("loading data")
        raise ValueError("loss is NaN at step 17")
`
	_, tj := submit(t, ns, y)
	r := result(t, startRun(t, ns, y, trainjob.Deadlines{}, nil))
	require.NoError(t, r.err)
	assert.Equal(t, trainjob.PhaseFailed, r.obs.Phase)
	assert.Equal(t, "FailedJobs", r.obs.Reason)
	assert.Contains(t, r.obs.Message, "last lines of "+trainersim.PodName(tj.Name, 0))
	assert.Contains(t, r.obs.Message, "ValueError: loss is NaN at step 17", "the real Python traceback")
	assert.Contains(t, r.obs.LogTail, "loading data")
	assert.Equal(t, trainjob.PhaseFailed, trainjob.Phase(r.obs.Outputs()[trainjob.OutPhase]))
}

// Kueue suspends a job, then resumes it: Suspended, then Running (whatever Suspended=False says),
// then Complete.
func TestSuspendedThenResumedThenComplete(t *testing.T) {
	ns := env.Namespace(t)
	y := "framework: torch\nlabels: {sim-mode: hold}\ntrainer: {func: " + pyFunc + ", numNodes: 2}"
	_, tj := submit(t, ns, y)
	setSuspend(t, tj, true)
	rec := newRecorder()
	done := startRun(t, ns, y, trainjob.Deadlines{}, rec.on)
	rec.awaitPhase(t, trainjob.PhaseSuspended)
	setSuspend(t, tj, false)
	rec.awaitPhase(t, trainjob.PhaseRunning)
	require.NoError(t, sim.Finish(t.Context(), ns, tj.Name, trainersim.Behavior{Mode: trainersim.Succeed,
		Progress: ptr.To[int32](100), Metrics: map[string]string{"loss": "0.12"}}))
	r := result(t, done)
	require.NoError(t, r.err)
	assert.Equal(t, trainjob.PhaseSucceeded, r.obs.Phase)
	// The changes on the way (the end is Wait's result): Suspended first, Running once resumed.
	// Nothing stricter: a controller acting on a stale cache may write Suspended=True once more
	// after the resume (the simulator does on a busy machine), and each write is reported.
	seen := rec.phases()
	require.NotEmpty(t, seen)
	assert.Equal(t, trainjob.PhaseSuspended, seen[0], "%v", seen)
	assert.Contains(t, seen, trainjob.PhaseRunning, "%v", seen)
	out := r.obs.Outputs()
	assert.Equal(t, "100", out[trainjob.OutProgress])
	assert.JSONEq(t, `{"loss":"0.12"}`, out[trainjob.OutMetrics])
}

func setSuspend(t *testing.T, tj *trainer.TrainJob, v bool) {
	t.Helper()
	cur := &trainer.TrainJob{}
	require.NoError(t, env.Client.Get(t.Context(), client.ObjectKeyFromObject(tj), cur))
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.Suspend = ptr.To(v)
	require.NoError(t, env.Client.Patch(t.Context(), cur, patch))
}

func TestTimeoutDeletesTheTrainJob(t *testing.T) {
	ns := env.Namespace(t)
	_, tj := submit(t, ns, holdStep)
	r := result(t, startRun(t, ns, holdStep, trainjob.Deadlines{Timeout: 2 * time.Second}, nil))
	require.NoError(t, r.err)
	assert.Equal(t, trainjob.PhaseTimedOut, r.obs.Phase)
	assert.Contains(t, r.obs.Message, "did not finish within 2s; it was deleted")
	err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(tj), &trainer.TrainJob{})
	assert.True(t, apierrors.IsNotFound(err), "the TrainJob must be gone: %v", err)
}

func TestTimeoutCanKeepTheTrainJob(t *testing.T) {
	ns := env.Namespace(t)
	_, tj := submit(t, ns, holdStep)
	r := result(t, startRun(t, ns, holdStep, trainjob.Deadlines{Timeout: time.Second, KeepOnTimeout: true}, nil))
	require.NoError(t, r.err)
	assert.Equal(t, trainjob.PhaseTimedOut, r.obs.Phase)
	require.NoError(t, env.Client.Get(t.Context(), client.ObjectKeyFromObject(tj), &trainer.TrainJob{}))
}

func TestTrainJobDeletedUnderneath(t *testing.T) {
	ns := env.Namespace(t)
	_, tj := submit(t, ns, holdStep)
	rec := newRecorder()
	done := startRun(t, ns, holdStep, trainjob.Deadlines{}, rec.on)
	rec.awaitPhase(t, trainjob.PhaseRunning)
	require.NoError(t, env.Client.Delete(t.Context(), tj))
	r := result(t, done)
	require.NoError(t, r.err)
	assert.Equal(t, trainjob.PhaseFailed, r.obs.Phase)
	assert.Equal(t, lifecycle.ReasonTrainJobDeleted, r.obs.Reason)
	assert.Contains(t, r.obs.Message, "TrainJob "+tj.Name+" was deleted before it finished")
}

// holdStep is a step whose TrainJob the simulator keeps running until told otherwise.
const holdStep = "framework: torch\nlabels: {sim-mode: hold}\ntrainer: {func: " + pyFunc + "}"

// The Trainer reports a JobSet it cannot create only as an Event; the wait shows it.
func TestResourceCreationFailureEventIsReported(t *testing.T) {
	ns := env.Namespace(t)
	y := "framework: jax\nlabels: {sim-mode: no-resources}\ntrainer: {func: \"def f(): pass\"}"
	_, tj := submit(t, ns, y)
	got := make(chan trainjob.Observation, 16)
	done := startRun(t, ns, y, trainjob.Deadlines{}, func(o trainjob.Observation) {
		if o.Reason == trainjob.ReasonResourcesCreationFailed {
			got <- o
		}
	})
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: tj.Name + "-", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: "TrainJob", APIVersion: trainer.GroupVersion.String(), Name: tj.Name, Namespace: ns, UID: tj.UID},
		Reason:         trainjob.ReasonResourcesCreationFailed, Message: "admission webhook denied the JobSet", Type: corev1.EventTypeWarning,
		LastTimestamp: metav1.Now(), Source: corev1.EventSource{Component: "trainer"},
	}
	require.NoError(t, env.Client.Create(t.Context(), ev))
	select {
	case o := <-got:
		assert.Contains(t, o.Message, "the Trainer cannot create its resources: admission webhook denied the JobSet")
	case <-time.After(testenv.Timeout):
		t.Fatal("the wait never reported the event")
	}
	require.NoError(t, env.Client.Delete(t.Context(), tj))
	assert.Equal(t, lifecycle.ReasonTrainJobDeleted, result(t, done).obs.Reason)
}
