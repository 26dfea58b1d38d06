package testenv_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/trainstep/trainstep/test/internal/testenv"
)

func TestStockRuntimesInstalled(t *testing.T) {
	var list trainer.ClusterTrainingRuntimeList
	require.NoError(t, env.Client.List(t.Context(), &list))

	frameworks := map[string]string{}
	for _, rt := range list.Items {
		frameworks[rt.Name] = rt.Labels["trainer.kubeflow.org/framework"]
	}
	assert.ElementsMatch(t, env.StockRuntimes, keys(frameworks))
	for name, fw := range frameworks {
		assert.NotEmptyf(t, fw, "ClusterTrainingRuntime %s has no trainer.kubeflow.org/framework label", name)
	}
	assert.Equal(t, "torch", frameworks["torch-distributed"])
	assert.Equal(t, testenv.DefaultTrainerVersion, env.TrainerVersion)
}

func TestGarbageCollectorDeletesOwnedObjects(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: ns}}
	require.NoError(t, env.Client.Create(ctx, owner))
	child := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "child", Namespace: ns,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}}}
	require.NoError(t, env.Client.Create(ctx, child))

	require.NoError(t, env.Client.Delete(ctx, owner))

	require.Eventually(t, func() bool {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(child), &corev1.ConfigMap{})
		return apierrors.IsNotFound(err)
	}, testenv.Timeout, testenv.Interval, "the garbage collector did not delete the owned ConfigMap")
}

func TestNamespaceDeletionCompletes(t *testing.T) {
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: env.Namespace(t)}}
	sa := &corev1.ServiceAccount{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "default"}, sa))

	require.NoError(t, env.Client.Delete(ctx, ns))

	// Without the namespace controller the namespace would stay Terminating for ever.
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{}))
	}, testenv.Timeout, testenv.Interval, "namespace %s was not deleted", ns.Name)
}

func TestUserWithoutBindingIsForbidden(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	cfg, err := env.UserConfig("alice", "trainstep:testers")
	require.NoError(t, err)
	alice, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	require.NoError(t, err)

	err = alice.List(ctx, &trainer.TrainJobList{}, client.InNamespace(ns))
	require.Truef(t, apierrors.IsForbidden(err), "listing TrainJobs without a RoleBinding: want Forbidden, got %v", err)

	// The same identity is allowed once bound: the Forbidden above came from RBAC, not from
	// a broken client certificate.
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "trainjob-reader", Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{trainer.GroupVersion.Group}, Resources: []string{"trainjobs"}, Verbs: []string{"list"}}}}
	require.NoError(t, env.Client.Create(ctx, role))
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "trainjob-reader", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "alice"}}}
	require.NoError(t, env.Client.Create(ctx, binding))
	require.Eventually(t, func() bool {
		return alice.List(ctx, &trainer.TrainJobList{}, client.InNamespace(ns)) == nil
	}, testenv.Timeout, testenv.Interval, "alice still cannot list TrainJobs after the RoleBinding")
}

func TestAdminKubeconfig(t *testing.T) {
	cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	require.NoError(t, err)
	admin, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	require.NoError(t, err)

	var list trainer.TrainJobList
	require.NoError(t, admin.List(t.Context(), &list, client.InNamespace(env.Namespace(t))))
}

func TestOlderTrainerVersion(t *testing.T) {
	older, err := testenv.Start(t.Context(), testenv.Options{TrainerVersion: "v2.1.0"})
	require.NoError(t, err)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			assert.NoError(t, older.Stop())
		}
	})

	assert.Equal(t, "v2.1.0", older.TrainerVersion)
	assert.Contains(t, older.TrainerModuleDir, "v2.1.0")
	var list trainer.ClusterTrainingRuntimeList
	require.NoError(t, older.Client.List(t.Context(), &list))
	names := make([]string, 0, len(list.Items))
	for _, rt := range list.Items {
		names = append(names, rt.Name)
	}
	assert.ElementsMatch(t, older.StockRuntimes, names)
	assert.Contains(t, names, "torch-distributed")

	stopped = true
	require.NoError(t, older.Stop())
	require.NoError(t, older.Stop(), "a second Stop must be a no-op")
	assert.NoFileExists(t, older.Kubeconfig, "Stop leaves its temp directory behind")
	assert.Error(t, older.Client.List(t.Context(), &list), "the apiserver still answers after Stop")
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
