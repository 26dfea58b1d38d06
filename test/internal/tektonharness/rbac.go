package tektonharness

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ManifestRBAC is manifests/tekton/rbac.yaml of this repository.
func ManifestRBAC() string {
	_, file, _, _ := runtime.Caller(0) // this file: <root>/test/internal/tektonharness/rbac.go
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "manifests", "tekton", "rbac.yaml")
}

// GrantManifestRBAC binds user to the rules manifests/tekton/rbac.yaml grants, less those drop
// selects (nil keeps all): its ClusterRole as a ClusterRole of the user's name, its leader
// election Role in ns. The ClusterRole and its binding go when the test ends; the Role goes with ns.
func GrantManifestRBAC(t *testing.T, c client.Client, ns, user string, drop func(rbacv1.PolicyRule) bool) {
	t.Helper()
	f, err := os.Open(ManifestRBAC())
	require.NoError(t, err)
	defer f.Close()
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	for {
		var raw map[string]any
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		b, err := json.Marshal(raw)
		require.NoError(t, err)
		switch raw["kind"] {
		case "ClusterRole":
			cr := &rbacv1.ClusterRole{}
			require.NoError(t, yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096).Decode(cr))
			cr.ObjectMeta = metav1.ObjectMeta{Name: user}
			if drop != nil {
				cr.Rules = slices.DeleteFunc(cr.Rules, drop)
			}
			require.NoError(t, c.Create(t.Context(), cr))
			t.Cleanup(func() { _ = c.Delete(t.Context(), cr) })
			crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user}, Subjects: subject,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user}}
			require.NoError(t, c.Create(t.Context(), crb))
			t.Cleanup(func() { _ = c.Delete(t.Context(), crb) })
		case "Role":
			role := &rbacv1.Role{}
			require.NoError(t, yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096).Decode(role))
			role.ObjectMeta = metav1.ObjectMeta{Name: "leader-election", Namespace: ns}
			require.NoError(t, c.Create(t.Context(), role))
			require.NoError(t, c.Create(t.Context(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "leader-election", Namespace: ns},
				Subjects: subject, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "leader-election"}}))
		}
	}
}
