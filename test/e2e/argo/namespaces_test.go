package argo_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/test/internal/argoharness"

	"github.com/trainstep/trainstep/test/internal/helmcmd"
)

// TestChartLeavesOtherNamespacesHTTPTemplatesRunning installs the chart with the real helm beside
// a workflow-controller that runs as Argo's cluster install does (its own namespace, every
// namespace managed), and runs another team's workflow, in a namespace trainstep was not
// installed in, whose one step is an HTTP template: Argo creates an agent pod for it, with every
// plugin of the controller's namespace and the workflow's as a sidecar, each with its
// ServiceAccount's token Secret looked up in the workflow's namespace. The workflow succeeds
// after each way of installing the chart:
//
//   - the default, the plugin in the workflow namespaces named (argo.namespaces): the other team's
//     agent pod has no trainstep sidecar;
//   - argo.pluginInControllerNamespace=true, the plugin in the controller's namespace and the
//     other team's namespace listed: the agent pod has the sidecar, and its ServiceAccount and
//     token Secret are there.
//
// Listing the controller's namespace without pluginInControllerNamespace (the chart's old
// default, argo) is refused, naming what to set: installed, it left the other team's workflow in
// Error, "create agent pod failed", its namespace having no trainstep-executor-plugin
// ServiceAccount.
func TestChartLeavesOtherNamespacesHTTPTemplatesRunning(t *testing.T) {
	controllerNS := env.Namespace(t)
	const instanceID = "trainstep-namespaces"
	harness.StartClusterController(t, controllerNS, instanceID)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("pong")) }))
	t.Cleanup(server.Close)

	for _, tc := range []struct {
		name, release string
		values        func(workflowNS, otherNS string) string
		sidecar       bool // the other team's agent pod has the trainstep sidecar
	}{{
		name: "default: the plugin in the workflow namespaces", release: "default-way",
		values: func(workflowNS, _ string) string {
			return fmt.Sprintf("argo: {enabled: true, namespaces: [%s], controllerNamespace: %s}\n", workflowNS, controllerNS)
		},
	}, {
		name: "asked for: the plugin in the controller's namespace", release: "controller-way",
		values: func(workflowNS, otherNS string) string {
			return fmt.Sprintf("argo: {enabled: true, namespaces: [%s, %s], controllerNamespace: %s, pluginInControllerNamespace: true}\n",
				workflowNS, otherNS, controllerNS)
		},
		sidecar: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			workflowNS, otherNS := env.Namespace(t), env.Namespace(t)
			helmInstall(t, tc.release, env.Namespace(t), tc.values(workflowNS, otherNS))

			wf := runHTTPWorkflow(t, otherNS, instanceID, server.URL, tc.sidecar)
			require.Equal(t, wfv1.WorkflowSucceeded, wf.Status.Phase, "%s\n%s", wf.Status.Message, argoharness.Nodes(wf))
		})
	}

	t.Run("refused: the controller's namespace listed, not asked for", func(t *testing.T) {
		out, err := helmcmd.Run(t, "template", "ns-refused", chartDir(t), "--namespace", "ops",
			"--set", "argo.enabled=true", "--set", "argo.namespaces={"+controllerNS+"}", "--set", "argo.controllerNamespace="+controllerNS)
		require.Error(t, err, out)
		assert.ErrorContains(t, err, "argo.namespaces lists "+controllerNS+", Argo's controller namespace")
		assert.ErrorContains(t, err, "set argo.pluginInControllerNamespace=true and list in argo.namespaces every namespace whose workflows use HTTP or plugin templates")
	})
}

// runHTTPWorkflow is another team's workflow in ns: one HTTP template calling url, as a
// ServiceAccount of the team's with what Argo's agent needs (its token Secret, the
// WorkflowTaskSet rights of Argo's quick-start agent Role), for the cluster controller of
// instanceID. It runs the agent pod the controller creates, as the pod says but for trainstep's
// sidecar, which an HTTP template never calls and which has no image here: its ServiceAccount's
// token Secret is mounted all the same, so a pod naming a Secret that does not exist does not
// start. It returns the completed Workflow.
func runHTTPWorkflow(t *testing.T, ns, instanceID, url string, sidecar bool) *wfv1.Workflow {
	t.Helper()
	const sa = "team-workflow"
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa + ".service-account-token",
			Annotations: map[string]string{corev1.ServiceAccountNameKey: sa}}, Type: corev1.SecretTypeServiceAccountToken},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"argoproj.io"}, Resources: []string{"workflowtasksets"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"argoproj.io"}, Resources: []string{"workflowtasksets/status"}, Verbs: []string{"patch"}},
		}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "agent"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}},
	} {
		require.NoError(t, c.Create(t.Context(), obj))
	}
	wf := &wfv1.Workflow{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "http-", Labels: map[string]string{argoharness.InstanceLabel: instanceID}},
		Spec: wfv1.WorkflowSpec{Entrypoint: "ping", ServiceAccountName: sa, Templates: []wfv1.Template{{
			Name: "ping", HTTP: &wfv1.HTTP{URL: url, SuccessCondition: "response.statusCode == 200"},
		}}},
	}
	require.NoError(t, c.Create(t.Context(), wf))

	pod := &corev1.Pod{}
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		l := &corev1.PodList{}
		require.NoError(ct, c.List(t.Context(), l, client.InNamespace(ns),
			client.MatchingLabels{"workflows.argoproj.io/workflow": wf.Name, "workflows.argoproj.io/component": "agent"}))
		got := &wfv1.Workflow{}
		require.NoError(ct, c.Get(t.Context(), client.ObjectKeyFromObject(wf), got))
		require.Len(ct, l.Items, 1, "the controller creates the agent pod: %s %s\n%s", got.Status.Phase, got.Status.Message, argoharness.Nodes(got))
		*pod = l.Items[0]
	}, e2eTimeout, argoharness.Poll)

	// Argo v3.7 does not give the WorkflowTaskSet the instance ID label its own informer selects
	// by (v4 does), and without it the controller never sees the agent's results: add it.
	ts := &wfv1.WorkflowTaskSet{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(wf), ts))
	orig := ts.DeepCopy()
	ts.Labels = map[string]string{argoharness.InstanceLabel: instanceID}
	require.NoError(t, c.Patch(t.Context(), ts, client.MergeFrom(orig)))

	var sidecars []string
	run := pod.DeepCopy()
	run.Spec.Containers = nil
	for _, ctr := range pod.Spec.Containers {
		if ctr.Name == "main" {
			run.Spec.Containers = append(run.Spec.Containers, ctr)
		} else {
			sidecars = append(sidecars, ctr.Name)
		}
	}
	if sidecar {
		require.Equal(t, []string{"trainstep-executor-plugin"}, sidecars, "Argo adds the controller namespace's plugin to every agent pod")
	} else {
		require.Empty(t, sidecars, "no plugin reaches a namespace trainstep was not installed in")
	}
	ctx, stop := context.WithCancel(context.WithoutCancel(t.Context()))
	pr, err := harness.RunPod(ctx, run)
	require.NoError(t, err)
	t.Cleanup(func() {
		stop() // SIGTERM, as when the completed workflow's agent pod is deleted
		<-pr.Done()
	})

	got := &wfv1.Workflow{}
	require.Eventually(t, func() bool {
		return c.Get(t.Context(), client.ObjectKeyFromObject(wf), got) == nil && got.Status.Phase.Completed()
	}, e2eTimeout, argoharness.Poll, "the workflow did not finish: %s\n%s", got.Status.Phase, argoharness.Nodes(got))
	return got
}

// chartDir is charts/trainstep.
func chartDir(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	return filepath.Join(root, "charts", "trainstep")
}

// helmInstall installs the chart as release name in ns with values (YAML) into this suite's
// apiserver, and uninstalls it when the test ends.
func helmInstall(t *testing.T, name, ns, values string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(f, []byte(values), 0o600))
	out, err := helmcmd.Run(t, "install", name, chartDir(t), "--namespace", ns, "--kubeconfig", env.Kubeconfig, "-f", f)
	require.NoError(t, err, out)
	t.Cleanup(func() {
		cmd := exec.CommandContext(context.WithoutCancel(t.Context()), helmcmd.Binary(t), "uninstall", name, "--namespace", ns, "--kubeconfig", env.Kubeconfig)
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("helm uninstall %s: %v\n%s", name, err, b)
		}
	})
}
