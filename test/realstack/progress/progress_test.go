package progress_test

import (
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/test/internal/realstack"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

const (
	timeout  = 3 * time.Minute
	interval = 200 * time.Millisecond
)

// startExecutor starts `executor run` against the stack in the background.
func startExecutor(t *testing.T, ns, step string, extra ...string) *realstack.Executor {
	t.Helper()
	return stack.StartExecutor(t, bin, ns, step, timeout, extra...)
}

// node0 waits for the running node-0 pod of the namespace's one TrainJob.
func node0(t *testing.T, ns string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		pods := &corev1.PodList{}
		require.NoError(c, stack.Client.List(t.Context(), pods, client.InNamespace(ns), client.MatchingLabels{
			trainjob.LabelReplicatedJob: trainjob.NodeJob, trainjob.LabelCompletionIndex: "0",
		}))
		require.Len(c, pods.Items, 1)
		require.Equal(c, corev1.PodRunning, pods.Items[0].Status.Phase)
		pod = &pods.Items[0]
	}, timeout, interval)
	return pod
}

// heldStep runs two nodes that stay Running until the test releases them (KWOK_HOLD).
const heldStep = `
framework: torch
trainer:
  numNodes: 2
  env: {KWOK_HOLD: "1"}
  func: |
    def train():
        print("training")
timeout: 3m
`

// Rank 0 reports through the Trainer's own status server: what the Trainer injected into the
// node pod (URL, CA, token) is what the post uses, the server authorizes the pod's projected
// token and writes status.trainerStatus itself (field manager trainer-status), and the
// executor shows it live and ends with each metric as an output.
func TestRankZeroReportsThroughTheStatusServer(t *testing.T) {
	t.Parallel()
	ns := stack.Namespace(t)
	r := startExecutor(t, ns, heldStep)
	pod := node0(t, ns)
	rep, err := stack.PodReporter(t.Context(), pod)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(rep.URL, "https://"+realstack.StatusServerHost+":"), rep.URL)

	// A token for another audience is refused: the server checks what it is given.
	forged := *rep
	forged.Token = "not-a-token"
	code, body, err := forged.Post(t.Context(), map[string]any{"trainerStatus": map[string]any{"progressPercentage": 1}})
	require.NoError(t, err)
	assert.Equal(t, 403, code, body)

	require.NoError(t, rep.Report(t.Context(), ptr.To[int32](42), ptr.To[int32](720), [2]string{"loss", "0.31"}, [2]string{"acc", "0.88"}))
	tj := &trainer.TrainJob{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		tjs := &trainer.TrainJobList{}
		require.NoError(c, stack.Client.List(t.Context(), tjs, client.InNamespace(ns)))
		require.Len(c, tjs.Items, 1)
		*tj = tjs.Items[0]
		require.NotNil(c, tj.Status.TrainerStatus)
		assert.Equal(c, int32(42), ptr.Deref(tj.Status.TrainerStatus.ProgressPercentage, -1))
	}, timeout, interval)
	managers := []string{}
	for _, f := range tj.ManagedFields {
		if f.Subresource == "status" {
			managers = append(managers, f.Manager)
		}
	}
	assert.Contains(t, managers, "trainer-status", "the status server wrote the status")

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Contains(c, r.Stderr.String(), "42% · 12m left · loss=0.31 acc=0.88")
	}, timeout, interval)

	require.NoError(t, rep.Report(t.Context(), ptr.To[int32](100), ptr.To[int32](0), [2]string{"loss", "0.12"}, [2]string{"acc", "0.95"}, [2]string{"eval/f1", "0.7"}))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &trainer.TrainJob{}
		require.NoError(c, stack.Client.Get(t.Context(), client.ObjectKeyFromObject(tj), got))
		require.NotNil(c, got.Status.TrainerStatus)
		assert.Equal(c, int32(100), ptr.Deref(got.Status.TrainerStatus.ProgressPercentage, -1))
	}, timeout, interval)
	require.NoError(t, stack.Release(t.Context(), ns, tj.Name))
	res := r.Result(t)
	exit, outs := res.Code, res.Outputs
	require.Equal(t, cli.ExitSucceeded, exit, "stderr:\n%s", r.Stderr.String())
	assert.Equal(t, "0.12", outs["metric-loss"])
	assert.Equal(t, "0.95", outs["metric-acc"])
	assert.Equal(t, "0.7", outs["metric-eval-f1"])
	assert.JSONEq(t, `{"loss":"0.12","acc":"0.95","eval/f1":"0.7"}`, outs["metrics"])
	assert.Equal(t, "100", outs["progress-percentage"])
}

// On a terminal the status line carries progress, and a line of its own is printed only when
// the state changes: a node restarted in place (OOMKilled) while progress is reported is such a
// change, and must appear on screen, not hide behind the progress part of the status line.
func TestARestartShowsOnATerminalWhileProgressIsReported(t *testing.T) {
	t.Parallel()
	ns := stack.Namespace(t)
	r := stack.StartExecutorOnATerminal(t, bin, ns, heldStep, timeout)
	pod := node0(t, ns)
	rep, err := stack.PodReporter(t.Context(), pod)
	require.NoError(t, err)
	require.NoError(t, rep.Report(t.Context(), ptr.To[int32](42), ptr.To[int32](720), [2]string{"loss", "0.31"}))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Contains(c, r.Stderr.String(), "42% · 12m left · loss=0.31")
	}, timeout, interval, "the status line shows the progress")

	require.NoError(t, stack.OOMRestart(t.Context(), ns, pod.Name))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Contains(c, r.Stderr.String(), "restarted: OOMKilled (exit code 137), attempt 2")
	}, timeout, interval, "the restart is on screen")

	tjs := testenv.TrainJobs(t.Context(), t, stack.Client, ns)
	require.Len(t, tjs, 1)
	require.NoError(t, stack.Release(t.Context(), ns, tjs[0].Name))
	res := r.Result(t)
	require.Equal(t, cli.ExitSucceeded, res.Code, "screen:\n%s", res.Stderr)
}

// With the gate on, a dry run says so once a node pod shows it.
func TestDryRunSaysProgressReportingIsOn(t *testing.T) {
	t.Parallel()
	ns := stack.Namespace(t)
	r := startExecutor(t, ns, heldStep)
	stack.Rank0(t, ns, "")
	dry := startExecutor(t, ns, heldStep, "--dry-run")
	code := dry.Result(t).Code
	require.Equal(t, cli.ExitSucceeded, code, dry.Stderr.String())
	assert.Regexp(t, `progress reporting: on \(pod \S+ got KUBEFLOW_TRAINER_SERVER_URL from the Trainer\)`, dry.Stderr.String())
	require.NoError(t, stack.Release(t.Context(), ns, ""))
	code = r.Result(t).Code
	require.Equal(t, cli.ExitSucceeded, code, r.Stderr.String())
	assert.NotContains(t, r.Stderr.String(), "progress reporting is off")
}

// A job whose reported progress stops moving for the step's hangTimeout fails as hung: the
// step says what it last reported and when, its class is hung (retryable), and the TrainJob,
// which holds its nodes doing nothing, is deleted.
func TestAJobWhoseProgressStopsFailsAsHung(t *testing.T) {
	t.Parallel()
	ns := stack.Namespace(t)
	r := startExecutor(t, ns, heldStep+"hangTimeout: 15s\n")
	pod := node0(t, ns)
	rep, err := stack.PodReporter(t.Context(), pod)
	require.NoError(t, err)
	require.NoError(t, rep.Report(t.Context(), ptr.To[int32](37), nil, [2]string{"loss", "0.5"}))

	res := r.Result(t)
	require.Equal(t, cli.ExitFailed, res.Code, "stderr:\n%s", res.Stderr)
	assert.Regexp(t, `is hung: its progress has not moved for 15s \(hangTimeout\); it last reported 37% · loss=0\.5 at \S+Z`, res.Outputs[trainjob.OutMessage])
	assert.Equal(t, trainjob.ReasonHung, res.Outputs[trainjob.OutReason])
	assert.Equal(t, string(trainjob.ClassHung), res.Outputs[trainjob.OutFailureClass])
	assert.Equal(t, "true", res.Outputs[trainjob.OutRetryable])
	assert.Empty(t, testenv.TrainJobs(t.Context(), t, stack.Client, ns), "the hung job is deleted")
}
