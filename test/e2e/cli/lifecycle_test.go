package cli_test

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

const holdStep = "framework: jax\nlabels: {sim-mode: hold}\ntrainer: {func: \"def f(): pass\"}\ntimeout: 10m\n"

// startHeld starts `executor run` on a step whose TrainJob runs until the test ends it, and
// returns once the TrainJob exists.
func startHeld(t *testing.T, ns string, extra ...string) (*exec.Cmd, trainer.TrainJob) {
	t.Helper()
	cmd, _, stderr := command(t, onCluster(ns, writeStep(t, holdStep), extra...)...)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "Running:") }, testenv.Timeout, testenv.Interval, stderr.String)
	tjs := testenv.TrainJobs(t.Context(), t, env.Client, ns)
	require.Len(t, tjs, 1)
	return cmd, tjs[0]
}

// kill9 is what an OOM kill, a node loss or `kill -9` does to a step: no signal handler runs.
func kill9(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	err := cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
}

// A step pod killed with -9 cannot clean up; with --owner-pod the TrainJob is garbage-collected
// when the pod goes (Argo's podGC, a deleted node), so nothing is orphaned.
func TestKilledStepPodLeavesNoTrainJob(t *testing.T) {
	ns := env.Namespace(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train-step", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "trainstep:dev"}}}}
	require.NoError(t, env.Client.Create(t.Context(), pod))
	cmd, tj := startHeld(t, ns, "--owner-pod", pod.Name, "--owner-pod-uid", string(pod.UID))
	require.Len(t, tj.OwnerReferences, 1)
	assert.Equal(t, pod.UID, tj.OwnerReferences[0].UID)
	kill9(t, cmd)
	require.NoError(t, env.Client.Get(t.Context(), client.ObjectKeyFromObject(&tj), &trainer.TrainJob{}), "a killed process deletes nothing")
	require.NoError(t, env.Client.Delete(t.Context(), pod))
	require.Eventually(t, func() bool { return len(testenv.TrainJobs(t.Context(), t, env.Client, ns)) == 0 },
		testenv.Timeout, testenv.Interval, "the garbage collector must remove the TrainJob with its pod")
}

// --owner-pod without its UID is refused before anything is created.
func TestOwnerPodNeedsItsUID(t *testing.T) {
	ns := env.Namespace(t)
	r := executor(t, onCluster(ns, writeStep(t, holdStep), "--owner-pod", "train-step")...)
	assert.Equal(t, cli.ExitInvalid, r.code, r.stderr)
	assert.Contains(t, r.stderr, "--owner-pod and --owner-pod-uid go together")
	assert.Empty(t, testenv.TrainJobs(t.Context(), t, env.Client, ns))
}

// kill -9 of `executor run` mid-step, then the pipeline's retry of the same pod: the same
// TrainJob is found and followed, not a second one started.
func TestKilledRunRestartedFindsTheSameTrainJob(t *testing.T) {
	ns := env.Namespace(t)
	key := []string{"--step-key", "train", "--owner-uid", "wf-kill9"}
	cmd, tj := startHeld(t, ns, key...)
	kill9(t, cmd)
	again, _ := startHeld(t, ns, key...)
	tjs := testenv.TrainJobs(t.Context(), t, env.Client, ns)
	require.Len(t, tjs, 1, "no duplicate")
	assert.Equal(t, tj.UID, tjs[0].UID)
	require.NoError(t, again.Process.Signal(syscall.SIGTERM))
	_ = again.Wait()
	assert.Empty(t, testenv.TrainJobs(t.Context(), t, env.Client, ns), "no orphan")
}

// A caller that may not watch Events (or pods) is told so at once, with the permission to
// grant, before anything is created: not after starting a training it cannot follow.
func TestForbiddenWatchFailsFastAndNamesThePermission(t *testing.T) {
	ns := env.Namespace(t)
	user := "step-" + ns
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{trainer.GroupVersion.Group}, Resources: []string{"trainjobs"}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
		{APIGroups: []string{trainer.GroupVersion.Group}, Resources: []string{"trainingruntimes"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"pods", "pods/log"}, Verbs: []string{"get", "list", "watch"}},
	}}
	require.NoError(t, env.Client.Create(t.Context(), role))
	require.NoError(t, env.Client.Create(t.Context(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user}}))
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{trainer.GroupVersion.Group}, Resources: []string{"clustertrainingruntimes"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, ResourceNames: []string{"trainjobs.trainer.kubeflow.org"}, Verbs: []string{"get"}}}}
	require.NoError(t, env.Client.Create(t.Context(), cr))
	t.Cleanup(func() { _ = env.Client.Delete(t.Context(), cr) })
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user}}
	require.NoError(t, env.Client.Create(t.Context(), crb))
	t.Cleanup(func() { _ = env.Client.Delete(t.Context(), crb) })
	kubeconfig, err := env.UserKubeconfig(user)
	require.NoError(t, err)

	r := executor(t, "run", "-f", writeStep(t, holdStep), "--kubeconfig", kubeconfig, "-n", ns)
	assert.Equal(t, cli.ExitError, r.code, r.stderr)
	assert.Contains(t, r.stderr, "needs list, watch on events in namespace "+ns)
	assert.Contains(t, r.stderr, "nothing was created")
	// The step may create a TrainJob but not follow it: it must not start a training it
	// would walk away from (every retry of the step would start another).
	assert.Empty(t, testenv.TrainJobs(t.Context(), t, env.Client, ns), "a step that cannot follow its TrainJob leaves none behind")
}
