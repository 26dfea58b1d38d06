package fault_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/plugin/argo"
	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/test/internal/argotest"
	"github.com/trainstep/trainstep/test/internal/harnessutil"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// process is a face run as its own binary, so a test can kill it with -9.
type process struct {
	cmd    *exec.Cmd
	output harnessutil.SyncBuffer
}

func startProcess(t *testing.T, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, args...)}
	p.cmd.Stdout, p.cmd.Stderr = &p.output, &p.output
	require.NoError(t, p.cmd.Start())
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		if t.Failed() {
			t.Logf("%s output:\n%s", args[0], p.output.String())
		}
	})
	return p
}

// kill is kill -9: no handler runs, no lease is released, nothing is cleaned up.
func (p *process) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	_ = p.cmd.Wait()
}

// The Argo plugin killed with -9 in the middle of a held call, and started again (the agent
// pod's sidecar restarts): the agent's next call finds the same TrainJob and the completion is
// reported. One TrainJob in all.
func TestArgoPluginKilledMidHeldCallFindsTheSameTrainJob(t *testing.T) {
	ns := env.Namespace(t)
	token := uuid.NewString()
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(token), 0o440))
	addr := harnessutil.FreeAddr(t)
	plugin := func() *process {
		p := startProcess(t, "argo-plugin", "--kubeconfig", env.Kubeconfig, "--namespace", ns, "--addr", addr,
			"--token-file", tokenFile, "--hold-max", "20s", "--requeue", "1s", "--metrics-addr", argo.MetricsOff)
		require.Eventually(t, func() bool { return ready("http://" + addr + "/readyz") }, testenv.Timeout, testenv.Interval, p.output.String)
		return p
	}
	wf := &wfv1.Workflow{}
	wf.Name, wf.Namespace = "train-dag", ns
	wf.Spec.Entrypoint = "train"
	startedByArgo(wf)
	require.NoError(t, c.Create(t.Context(), wf))
	args, err := argotest.Args(wf.Name, ns, string(wf.UID), "key: train-dag.train\nattempt: \"0\"\nframework: jax\ntrainer: {func: \"def f(): pass\"}\n")
	require.NoError(t, err)
	url := "http://" + addr

	first := plugin()
	held := argotest.ExecuteAsync(t.Context(), url, token, args)
	require.Eventually(t, func() bool { return len(testenv.TrainJobs(t.Context(), t, env.Client, ns)) == 1 }, testenv.Timeout, testenv.Interval)
	tj := testenv.TrainJobs(t.Context(), t, env.Client, ns)[0]
	first.kill(t)
	answer := <-held
	require.Error(t, answer.Err, "the held call dies with the plugin")

	plugin()
	r, err := argotest.Execute(t.Context(), url, token, args)
	require.NoError(t, err)
	require.NotNil(t, r.Node)
	name, _ := r.Output("trainjob-name")
	assert.Equal(t, tj.Name, name, r.Node.Message)
	finishAll(t, testenv.TrainJobs(t.Context(), t, env.Client, ns))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		r, err := argotest.Execute(t.Context(), url, token, args)
		if assert.NoError(ct, err) && assert.NotNil(ct, r.Node) {
			assert.Equal(ct, wfv1.NodeSucceeded, r.Node.Phase, r.Node.Message)
		}
	}, testenv.Timeout, testenv.Interval)
	census(t, ns, 1, 0)
}

// Two Tekton controller replicas; the leader is killed with -9 mid-step (its Lease is not
// released). The other takes the Lease once it expires and finishes the same TrainJob's run.
func TestTektonLeaderKilledTheOtherReplicaTakesOver(t *testing.T) {
	ns := env.Namespace(t)
	replica := func() *process {
		return startProcess(t, "tekton-controller", "--kubeconfig", env.Kubeconfig, "--namespaces", ns,
			"--leader-elect", "--leader-election-namespace", ns, "--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	}
	leader := replica()
	lease := &coordinationv1.Lease{}
	require.Eventually(t, func() bool {
		return c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: tekton.Name}, lease) == nil && lease.Spec.HolderIdentity != nil
	}, testenv.Timeout, testenv.Interval, "the first replica must lead")
	first := *lease.Spec.HolderIdentity
	replica()

	customRun(t, ns, "train")
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		cond := runCondition(t, ns, "train")
		if assert.NotNil(ct, cond) {
			assert.Equal(ct, "Running", cond.Reason)
		}
	}, testenv.Timeout, testenv.Interval)
	tjs := testenv.TrainJobs(t.Context(), t, env.Client, ns)
	require.Len(t, tjs, 1)
	leader.kill(t)
	finishAll(t, tjs)

	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		cond := runCondition(t, ns, "train")
		if assert.NotNil(ct, cond) {
			assert.Equal(ct, corev1.ConditionTrue, cond.Status, cond.Message)
		}
	}, 3*testenv.Timeout, testenv.Interval, "the other replica must take over and finish the run")
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: tekton.Name}, lease))
	assert.NotEqual(t, first, *lease.Spec.HolderIdentity, "the Lease changed hands")
	census(t, ns, 1, 0)
}
