package argo_test

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/argo"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// manifestObjects reads the objects of one file of manifests/argo.
func manifestObjects(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	f, err := os.Open("../../../manifests/argo/" + file)
	require.NoError(t, err)
	defer f.Close()
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// TestAdmissionPolicyNarrowsThePluginToken: with manifests/argo's RBAC and admission policy on
// the apiserver, the plugin's ServiceAccount may create and delete its own TrainJobs but neither
// delete nor create anyone else's; other users are not affected.
func TestAdmissionPolicyNarrowsThePluginToken(t *testing.T) {
	ns := env.Namespace(t)
	for _, u := range manifestObjects(t, "admission-policy.yaml") {
		// `kubectl apply -k manifests/argo` sends these cluster-scoped objects with the
		// kustomization's namespace (kustomize does not know the kinds); the apiserver drops it.
		u.SetNamespace("ml")
		require.NoError(t, client.IgnoreAlreadyExists(c.Create(t.Context(), u)))
		t.Cleanup(func() { _ = c.Delete(t.Context(), u) })
	}
	for _, u := range manifestObjects(t, "rbac.yaml") {
		if (u.GetKind() == "Role" || u.GetKind() == "RoleBinding") && u.GetName() == "trainstep-executor-plugin" {
			u.SetNamespace(ns)
			require.NoError(t, c.Create(t.Context(), u))
		}
	}
	// A client certificate with the ServiceAccount's user name is the ServiceAccount to RBAC and
	// to the policy's request.userInfo.username.
	cfg, err := env.UserConfig("system:serviceaccount:"+ns+":trainstep-executor-plugin", "system:serviceaccounts", "system:serviceaccounts:"+ns)
	require.NoError(t, err)
	sa, err := client.New(cfg, client.Options{Scheme: c.Scheme()})
	require.NoError(t, err)

	job := func(name string, labels map[string]string) *trainer.TrainJob {
		l := map[string]string{SimMode: "hold"}
		for k, v := range labels {
			l[k] = v
		}
		return &trainer.TrainJob{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l},
			Spec:       trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"}},
		}
	}
	ours := map[string]string{trainjob.LabelManagedBy: trainjob.ManagedByValue, trainjob.LabelEngine: argo.Engine}
	tekton := map[string]string{trainjob.LabelManagedBy: trainjob.ManagedByValue, trainjob.LabelEngine: "tekton"}

	foreign := job("someone-elses", nil)
	require.NoError(t, c.Create(t.Context(), foreign))
	// The policy is enforced once the apiserver has loaded it.
	// The policy is enforced once the apiserver has loaded it: probe with dry runs (admission runs,
	// nothing is deleted), then delete for real.
	require.Eventually(t, func() bool {
		last := sa.Delete(t.Context(), foreign.DeepCopy(), client.DryRunAll)
		return apierrors.IsForbidden(last) && strings.Contains(last.Error(), "may only change or delete")
	}, testenv.Timeout, testenv.Interval, "deleting another's TrainJob must be refused by the policy")
	err = sa.Delete(t.Context(), foreign.DeepCopy())
	require.True(t, apierrors.IsForbidden(err), "deleting another's TrainJob: %v", err)

	err = sa.Create(t.Context(), job("not-labelled", nil))
	require.True(t, apierrors.IsForbidden(err), "creating an unlabelled TrainJob: %v", err)
	assert.Contains(t, err.Error(), "may only create")
	err = sa.Create(t.Context(), job("another-engine", tekton))
	require.True(t, apierrors.IsForbidden(err), "creating another engine's TrainJob: %v", err)
	other := job("tektons", tekton)
	require.NoError(t, c.Create(t.Context(), other))
	err = sa.Delete(t.Context(), other)
	require.True(t, apierrors.IsForbidden(err), "deleting another engine's TrainJob: %v", err)

	own := job("own", ours)
	require.NoError(t, sa.Create(t.Context(), own), "the plugin creates its own TrainJobs")
	require.NoError(t, sa.Delete(t.Context(), own), "and deletes them")
	require.NoError(t, c.Delete(t.Context(), foreign), "other users are not matched by the policy")
}
