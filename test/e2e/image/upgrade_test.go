package image_test

// An upgrade and an uninstall of the chart, the way docs/install.md says a user does them: helm
// upgrade from the previous release's chart while a step runs, then helm uninstall, and a look at
// what is left.

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/stepcache"
	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/argo"
	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// previousChart is the chart a checkout installed before this release's: charts/trainstep at
// 7b94bf0 (version 0.2.0, before issue 49 moved the Argo plugin out of Argo's controller
// namespace). No release of trainstep is tagged yet, so that is "the previous release's chart".
// It is a copy on purpose, as test/internal/previous is: it must not follow charts/trainstep.
func previousChart() string {
	return filepath.Join(root, "test", "e2e", "image", "testdata", "chart-0.2.0")
}

// heldCachedStep runs one node whose pod stays Running until the test releases it (KWOK_HOLD),
// with a cache block, so its success is stored in the namespace's step cache.
const heldCachedStep = `framework: torch
trainer:
  numNodes: 1
  env: {KWOK_HOLD: "1"}
  func: |
    def train():
        print("training")
cache: {maxAge: 1h}
timeout: 10m
`

// TestChartUpgradeUnderARunningStepThenUninstall: the previous release's chart is installed with
// both faces (helm install, the release's image by digest, a values file), its Tekton controller
// and Argo janitor started from the image. A CustomRun's step is running, its pod held, when the
// chart is upgraded to this one with the same values file and each Deployment's pod is replaced
// as a rollout does (the old one stopped with SIGTERM, a new one started from the upgraded
// Deployment). The step ends as it would have: Succeeded on the TrainJob made before the upgrade,
// its JobSet not made again, its result stored in the step cache. helm uninstall then removes
// every object of the release, and what is left is what docs/install.md says stays: the
// release's namespace with the leader-election Leases, the TrainJob (owned by its CustomRun) and
// the step cache's ConfigMap.
func TestChartUpgradeUnderARunningStepThenUninstall(t *testing.T) {
	digest, err := os.ReadFile(filepath.Join(dist, "image", "digest"))
	require.NoError(t, err)
	workflows, runNS := stack.Namespace(t), stack.Namespace(t)
	values := "tekton: {enabled: true}\nargo: {enabled: true, namespaces: [" + workflows + "]}\n" +
		"image: {repository: " + repository + ", digest: " + strings.TrimSpace(string(digest)) + "}\n"
	previous := chartRelease{name: "ts", namespace: "chart-upgrade", values: values, chart: previousChart()}
	helmInstall(t, previous)
	out, err := runHelm(t, "history", previous.name, "--namespace", previous.namespace, "--kubeconfig", stack.Kubeconfig, "-o", "yaml")
	require.NoError(t, err)
	require.Contains(t, out, "chart: trainstep-0.2.0", "the previous release's chart")

	const controller, janitor = "ts-trainstep-tekton-controller", "ts-trainstep-argo-janitor"
	pods := map[string]*running{}
	for _, name := range []string{controller, janitor} {
		pods[name] = startDeployment(t, previous.namespace, name)
	}

	run := &v1beta1.CustomRun{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: runNS},
		Spec: v1beta1.CustomRunSpec{
			CustomRef: &v1beta1.TaskRef{APIVersion: tekton.APIVersion, Kind: tekton.Kind},
			Params:    []v1beta1.Param{{Name: "step", Value: v1beta1.ParamValue{Type: v1beta1.ParamTypeString, StringVal: heldCachedStep}}},
		},
	}
	run.APIVersion, run.Kind = v1beta1.GroupVersion.String(), "CustomRun"
	require.NoError(t, c.Create(t.Context(), run))
	var before corev1.Pod
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		ps := &corev1.PodList{}
		require.NoError(ct, c.List(t.Context(), ps, client.InNamespace(runNS)))
		require.Len(ct, ps.Items, 1)
		assert.Equal(ct, corev1.PodRunning, ps.Items[0].Status.Phase)
		before = ps.Items[0]
	}, stepTimeout, testenv.Interval, "the step's pod must run before the upgrade; controller log:\n%s", tail(pods[controller].Log.String(), 30))
	tjs := testenv.TrainJobs(t.Context(), t, stack.Client, runNS)
	require.Len(t, tjs, 1)
	tj := tjs[0]
	js := jobSet(t, runNS, tj.Name)

	// The upgrade: helm upgrade with the same values file, then each Deployment's rollout.
	out, err = runHelm(t, append([]string{"upgrade", previous.name, chartDir(), "--kubeconfig", stack.Kubeconfig}, previous.args(t)...)...)
	require.NoError(t, err)
	assert.Contains(t, out, "is installed as release ts", "this release's NOTES.txt")
	for _, name := range []string{controller, janitor} {
		assert.Equal(t, 0, pods[name].stop(t), "%s's old pod ends cleanly on SIGTERM:\n%s", name, tail(pods[name].Log.String(), 30))
	}
	got := &v1beta1.CustomRun{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(run), got))
	require.NotNil(t, got.Status.Succeeded(), "the previous release's controller recorded the run")
	require.Equal(t, corev1.ConditionUnknown, got.Status.Succeeded().Status, "the step is in flight across the upgrade")
	for _, name := range []string{controller, janitor} {
		pods[name] = startDeployment(t, previous.namespace, name)
	}

	require.NoError(t, stack.Release(t.Context(), runNS, ""))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		require.NoError(ct, c.Get(t.Context(), client.ObjectKeyFromObject(run), got))
		cond := got.Status.Succeeded()
		require.NotNil(ct, cond)
		assert.Equal(ct, "True "+tekton.ReasonSucceeded, string(cond.Status)+" "+cond.Reason, cond.Message)
	}, stepTimeout, testenv.Interval, "the CustomRun did not succeed after the upgrade; controller log:\n%s", tail(pods[controller].Log.String(), 30))
	results := map[string]string{}
	for _, r := range got.Status.Results {
		results[r.Name] = r.Value
	}
	assert.Equal(t, tj.Name, results[trainjob.OutName], "the step names the TrainJob made before the upgrade")
	after := testenv.TrainJobs(t.Context(), t, stack.Client, runNS)
	require.Len(t, after, 1, "one TrainJob for the step")
	assert.Equal(t, tj.UID, after[0].UID, "the TrainJob is the one made before the upgrade")
	assert.Equal(t, js.GetUID(), jobSet(t, runNS, tj.Name).GetUID(), "the JobSet was not made again")
	ps := &corev1.PodList{}
	require.NoError(t, c.List(t.Context(), ps, client.InNamespace(runNS)))
	require.Len(t, ps.Items, 1)
	assert.Equal(t, before.UID, ps.Items[0].UID, "the pod was not made again")
	cache := &corev1.ConfigMap{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: runNS, Name: stepcache.ConfigMapName}, cache), "the step's success is stored")
	require.NotEmpty(t, results[trainjob.OutCacheKey])
	assert.Equal(t, []string{results[trainjob.OutCacheKey]}, keys(cache.Data), "the success stored under the step's key, its claim gone")
	assert.Contains(t, cache.Data[results[trainjob.OutCacheKey]], `"trainJob":"`+tj.Name+`"`, "the entry names the TrainJob that trained")

	// The uninstall: every object of the release goes; what stays is what docs/install.md says.
	manifest, err := runHelm(t, "get", "manifest", previous.name, "--namespace", previous.namespace, "--kubeconfig", stack.Kubeconfig)
	require.NoError(t, err)
	installed := decode(t, []byte(manifest))
	require.NotEmpty(t, installed)
	for _, name := range []string{controller, janitor} {
		assert.Equal(t, 0, pods[name].stop(t), "%s ends cleanly on SIGTERM", name)
	}
	_, err = runHelm(t, "uninstall", previous.name, "--namespace", previous.namespace, "--kubeconfig", stack.Kubeconfig)
	require.NoError(t, err)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		for _, u := range installed {
			obj := &unstructured.Unstructured{}
			obj.SetGroupVersionKind(u.GroupVersionKind())
			err := c.Get(t.Context(), client.ObjectKey{Namespace: u.GetNamespace(), Name: u.GetName()}, obj)
			assert.True(ct, apierrors.IsNotFound(err), "%s %s/%s is left after helm uninstall (%v)", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}, testenv.Timeout, testenv.Interval)

	ns := &corev1.Namespace{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Name: previous.namespace}, ns), "helm uninstall leaves the namespace --create-namespace made")
	assert.Equal(t, map[string][]string{"Lease": {argo.JanitorName, tekton.Name}}, leftIn(t, previous.namespace),
		"the release's namespace keeps the leader-election Leases alone")
	assert.Equal(t, map[string][]string{}, leftIn(t, workflows), "nothing of the Argo face is left in its workflow namespace")
	// The step's namespace holds the Trainer's objects too (the TrainJob's JobSet, pods and TLS
	// ConfigMap): trainstep's are the ones it labels.
	assert.Equal(t, map[string][]string{"ConfigMap": {stepcache.ConfigMapName}, "TrainJob": {tj.Name}},
		leftIn(t, runNS, client.MatchingLabels{trainjob.LabelManagedBy: trainjob.ManagedByValue}),
		"the step's namespace keeps trainstep's TrainJob and the step cache")
	kept := &trainer.TrainJob{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: runNS, Name: tj.Name}, kept))
	require.Len(t, kept.OwnerReferences, 1)
	assert.Equal(t, run.Name, kept.OwnerReferences[0].Name, "the TrainJob goes with its CustomRun")
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		assert.Empty(t, names(t, clusterKinds[kind], "", client.MatchingLabels{"app.kubernetes.io/instance": previous.name}), "%ss of the release", kind)
	}
}

// startDeployment starts the container of Deployment ns/name from the image, as its new pod, and
// waits for its readinessProbe.
func startDeployment(t *testing.T, ns, name string) *running {
	t.Helper()
	p, ctr := deployment(t, ns, name)
	assert.Equal(t, releaseImage(t), ctr.Image, "%s's image", name)
	rootfs, cfg := amd64(t)
	r := start(t, rootfs, cfg, p, ctr)
	r.ready(t, ctr)
	return r
}

// jobSet is TrainJob ns/name's JobSet.
func jobSet(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "jobset.x-k8s.io", Version: "v1alpha2", Kind: "JobSet"})
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, u))
	return u
}

// namespacedKinds are what an install of trainstep, or trainstep at run time, may leave in a
// namespace.
var namespacedKinds = map[string]schema.GroupVersionKind{
	"ConfigMap":      {Version: "v1", Kind: "ConfigMap"},
	"Secret":         {Version: "v1", Kind: "Secret"},
	"ServiceAccount": {Version: "v1", Kind: "ServiceAccount"},
	"Role":           {Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"},
	"RoleBinding":    {Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"},
	"Deployment":     {Group: "apps", Version: "v1", Kind: "Deployment"},
	"Lease":          {Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"},
	"TrainJob":       trainer.SchemeGroupVersion.WithKind("TrainJob"),
}

var clusterKinds = map[string]schema.GroupVersionKind{
	"ClusterRole":                      {Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"},
	"ClusterRoleBinding":               {Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"},
	"ValidatingAdmissionPolicy":        {Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicy"},
	"ValidatingAdmissionPolicyBinding": {Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicyBinding"},
}

// leftIn is what namespace ns holds of namespacedKinds (those opts select), by kind, but what
// Kubernetes makes in every namespace (the ServiceAccount default, the ConfigMap
// kube-root-ca.crt).
func leftIn(t *testing.T, ns string, opts ...client.ListOption) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for kind, gvk := range namespacedKinds {
		var left []string
		for _, n := range names(t, gvk, ns, opts...) {
			if (kind == "ServiceAccount" && n == "default") || (kind == "ConfigMap" && n == "kube-root-ca.crt") {
				continue
			}
			left = append(left, n)
		}
		if len(left) > 0 {
			out[kind] = left
		}
	}
	return out
}

// names are the sorted names of the objects of gvk in ns ("" for cluster-scoped ones).
func names(t *testing.T, gvk schema.GroupVersionKind, ns string, opts ...client.ListOption) []string {
	t.Helper()
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	require.NoError(t, c.List(t.Context(), l, opts...))
	var out []string
	for _, u := range l.Items {
		out = append(out, u.GetName())
	}
	sort.Strings(out)
	return out
}
