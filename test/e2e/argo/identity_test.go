package argo_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/argoharness"
	"github.com/trainstep/trainstep/test/internal/testenv"
	"github.com/trainstep/trainstep/test/internal/trainersim"
)

// cliStepSA is the ServiceAccount of the container steps that run `executor run`.
const cliStepSA = "trainstep-cli-step"

// cliRetryWorkflow is docs/cli.md's container-step recipe (`executor run` with the step pod's name
// and UID from the downward API, and its UID as the run) in a template with a retryStrategy.
func cliRetryWorkflow(bin, stepFile string) string {
	return fmt.Sprintf(`
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: cli-retry-}
spec:
  entrypoint: main
  serviceAccountName: %[1]s
  templates:
    - name: main
      steps:
        - - {name: train, template: train}
    - name: train
      retryStrategy: {limit: "1"}
      outputs:
        parameters:
          - {name: trainjob-name, valueFrom: {path: /tmp/outputs/trainjob-name}}
      container:
        image: trainstep:dev
        command: [%[2]s, run, -f, %[3]s, --output-dir, /tmp/outputs,
                  --step-key, "{{node.name}}", --owner-uid, "{{workflow.uid}}", --attempt, "{{retries}}"]
        env:
          - {name: TRAINSTEP_OWNER_POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
          - {name: TRAINSTEP_OWNER_POD_UID, valueFrom: {fieldRef: {fieldPath: metadata.uid}}}
          - {name: TRAINSTEP_RUN, valueFrom: {fieldRef: {fieldPath: metadata.uid}}}
`, cliStepSA, bin, stepFile)
}

// TestArgoRetryOfAContainerStepTrainsAgain: a container step running `executor run` by README's
// recipe fails on both attempts of its retryStrategy; `argo retry` (what it does to the
// Workflow, see retryWorkflow, and the failed pods it deletes) runs the node again with the same
// {{workflow.uid}}, {{node.name}} and {{retries}}: the new pod trains again with a TrainJob of
// its own instead of re-adopting the failed one, and the step run again in that pod (its command,
// its UID) adopts the new job. The failed jobs' garbage collection (their
// owner pods are deleted) is held by a finalizer, as a busy garbage collector or another
// controller's finalizer would hold it: a failed job still there must not be adopted. Argo's
// controller creates the pods; the harness runs their argoexec and executor processes.
func TestArgoRetryOfAContainerStepTrainsAgain(t *testing.T) {
	ensureCLIStepServiceAccount(t)
	dir, err := os.MkdirTemp("/var/tmp", "trainstep-e2e-cli-step-") // not /tmp: each container has its own
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	bin := filepath.Join(dir, "executor")
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "github.com/trainstep/trainstep/cmd/executor").CombinedOutput()
	require.NoError(t, err, "building the executor: %s", out)
	stepFile := filepath.Join(dir, "step.yaml")
	writeMode := func(mode string) {
		require.NoError(t, os.WriteFile(stepFile, fmt.Appendf(nil,
			"framework: xgboost\nlabels: {%s: %s}\ntrainer: {numNodes: 1, func: \"def train():\\n    pass\\n\"}\n", trainersim.ModeLabel, mode), 0o644))
	}
	writeMode("fail")

	wf := harness.Submit(t, cliRetryWorkflow(bin, stepFile))
	runner := harness.RunPods(context.WithoutCancel(t.Context()), wf.Name)
	t.Cleanup(func() { assert.NoError(t, runner.Stop()) })
	got := harness.WaitPhase(t, wf.Name, e2eTimeout)
	require.Equal(t, wfv1.WorkflowFailed, got.Status.Phase, argoharness.Nodes(got))
	failed := trainJobsOf(t, wf)
	require.Len(t, failed, 2, "one TrainJob per attempt of the retryStrategy: %s", argoharness.Nodes(got))
	for _, name := range failed {
		holdDeletion(t, name)
	}

	// The step is fixed (its jobs now succeed) and the workflow retried.
	writeMode("succeed")
	deletePodsOf(t, wf.Name) // first, as Argo's server does: a pod left behind would be re-adopted by the node
	require.NoError(t, c.Update(t.Context(), retryWorkflow(got, harness.Release())))
	got = harness.WaitPhase(t, wf.Name, e2eTimeout)
	require.Equal(t, wfv1.WorkflowSucceeded, got.Status.Phase, "the retried node trains again: %s", argoharness.Nodes(got))
	jobs := trainJobsOf(t, wf)
	require.Len(t, jobs, 3, "the retried node gets a TrainJob of its own: %s", argoharness.Nodes(got))
	var ran string
	for _, n := range got.Status.Nodes {
		if n.Type == wfv1.NodeTypePod && n.Phase == wfv1.NodeSucceeded {
			ran = argoharness.Output(&n, trainjob.OutName)
		}
	}
	assert.NotContains(t, failed, ran, "the node reports the new TrainJob")
	assert.Contains(t, jobs, ran)
	tj := &trainer.TrainJob{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: Namespace, Name: ran}, tj))
	assert.NotEmpty(t, tj.Labels[trainjob.LabelRun], "the pod's UID is the run")

	// The same step run again in the same pod (its command, its pod's UID) adopts that job.
	again := rerunInPod(t, wf.Name)
	assert.Contains(t, again, "found existing TrainJob "+Namespace+"/"+ran)
	assert.Len(t, trainJobsOf(t, wf), 3, "no TrainJob for a step run again in its pod")
}

// rerunInPod runs the `executor run` command of the workflow's succeeded pod again, with the
// pod's UID as the run (what a container restarted in that pod would get), and returns its stderr.
func rerunInPod(t *testing.T, wfName string) string {
	t.Helper()
	l := &corev1.PodList{}
	require.NoError(t, c.List(t.Context(), l, client.InNamespace(Namespace), client.MatchingLabels{"workflows.argoproj.io/workflow": wfName}))
	var pod *corev1.Pod
	for i := range l.Items {
		if l.Items[i].Status.Phase == corev1.PodSucceeded {
			pod = &l.Items[i]
		}
	}
	require.NotNil(t, pod, "the retried node's pod")
	var args []string
	for _, ctr := range pod.Spec.Containers {
		if ctr.Name == "main" {
			args = ctr.Command[slices.Index(ctr.Command, "--")+1:] // after argoexec emissary's own
		}
	}
	require.NotEmpty(t, args, "pod %s has no main container command", pod.Name)
	cmd := exec.CommandContext(t.Context(), args[0], append(args[1:], "--output-dir", t.TempDir(), "--kubeconfig", env.Kubeconfig, "-n", Namespace)...)
	cmd.Env = append(os.Environ(), "TRAINSTEP_RUN="+string(pod.UID))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return string(out)
}

// holdDeletion puts a finalizer on a TrainJob until the test ends.
func holdDeletion(t *testing.T, name string) {
	t.Helper()
	const finalizer = "trainstep.dev/test-hold"
	key := client.ObjectKey{Namespace: Namespace, Name: name}
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		tj := &trainer.TrainJob{}
		if err := c.Get(t.Context(), key, tj); err != nil {
			return err
		}
		controllerutil.AddFinalizer(tj, finalizer)
		return c.Update(t.Context(), tj)
	}))
	t.Cleanup(func() {
		ctx := context.WithoutCancel(t.Context())
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			tj := &trainer.TrainJob{}
			if err := c.Get(ctx, key, tj); err != nil {
				return err
			}
			controllerutil.RemoveFinalizer(tj, finalizer)
			return c.Update(ctx, tj)
		})
		assert.NoError(t, client.IgnoreNotFound(err))
	})
}

// deletePodsOf deletes a workflow's pods, as `argo retry` deletes the failed nodes' pods
// (RetryWorkflow in Argo's API server deletes each pod FormulateRetryWorkflow names, and every
// pod here failed), and waits until they are gone.
func deletePodsOf(t *testing.T, wfName string) {
	t.Helper()
	sel := client.MatchingLabels{"workflows.argoproj.io/workflow": wfName}
	require.NoError(t, c.DeleteAllOf(t.Context(), &corev1.Pod{}, client.InNamespace(Namespace), sel))
	require.Eventually(t, func() bool {
		l := &corev1.PodList{}
		return c.List(t.Context(), l, client.InNamespace(Namespace), sel) == nil && len(l.Items) == 0
	}, testenv.Timeout, argoharness.Poll)
}

// ensureCLIStepServiceAccount creates the container steps' ServiceAccount with what README says
// `executor run` needs, plus what Argo's wait container needs (WorkflowTaskResults).
func ensureCLIStepServiceAccount(t *testing.T) {
	t.Helper()
	read := []string{"get", "list", "watch"}
	cluster := "trainstep-cli-step-" + Namespace
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: cliStepSA}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: cliStepSA}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{trainer.GroupVersion.Group}, Resources: []string{"trainjobs"}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
			{APIGroups: []string{trainer.GroupVersion.Group}, Resources: []string{"trainingruntimes"}, Verbs: read},
			{APIGroups: []string{""}, Resources: []string{"pods", "events"}, Verbs: read},
			{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
			{APIGroups: []string{"argoproj.io"}, Resources: []string{"workflowtaskresults"}, Verbs: []string{"create", "patch"}},
		}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: cliStepSA},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: cliStepSA},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: Namespace, Name: cliStepSA}}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: cluster}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{trainer.GroupVersion.Group}, Resources: []string{"clustertrainingruntimes"}, Verbs: read},
			{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"},
				ResourceNames: []string{"trainjobs.trainer.kubeflow.org"}, Verbs: []string{"get"}},
		}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: cluster},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cluster},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: Namespace, Name: cliStepSA}}},
	} {
		if err := c.Create(t.Context(), obj); err != nil && !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
}
