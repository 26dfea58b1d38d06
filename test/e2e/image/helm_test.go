package image_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/internal/release"
)

// helm is the helm binary hack/build-helm.sh built into HELM_ASSETS.
func helm(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("HELM_ASSETS")
	require.NotEmpty(t, dir, "HELM_ASSETS is not set: run `make test-assets` (it builds helm into the cache) and set HELM_ASSETS to its directory (`make test` does both)")
	bin := filepath.Join(dir, "helm")
	_, err := os.Stat(bin)
	require.NoError(t, err, "helm is missing from HELM_ASSETS=%s: run `make test-assets`", dir)
	return bin
}

// helmTemplate renders charts/trainstep with the real helm and returns its objects.
func helmTemplate(t *testing.T, set ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", "trainstep", filepath.Join(root, "charts", "trainstep")}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	cmd := exec.CommandContext(t.Context(), helm(t), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "helm template: %s", stderr.String())
	return decode(t, out)
}

func decode(t *testing.T, b []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			require.ErrorContains(t, err, "EOF")
			return objs
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// byKey indexes objects by kind/namespace/name, the Argo plugin's container (YAML in its
// ConfigMap) decoded so that two spellings of one container compare equal.
func byKey(t *testing.T, objs []*unstructured.Unstructured) map[string]map[string]any {
	t.Helper()
	m := map[string]map[string]any{}
	for _, u := range objs {
		o := u.DeepCopy().Object
		if data, ok := o["data"].(map[string]any); ok {
			if s, ok := data["sidecar.container"].(string); ok {
				var c map[string]any
				require.NoError(t, yaml.Unmarshal([]byte(s), &c))
				data["sidecar.container"] = c
			}
		}
		k := fmt.Sprintf("%s/%s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
		require.NotContains(t, m, k, "two objects %s", k)
		m[k] = o
	}
	return m
}

func keys(m map[string]map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// With its default values the chart is what `kubectl apply -k manifests/<face>` applies, object
// for object (values.yaml and the templates are generated from manifests/: make generate).
func TestChartRendersWhatKustomizeBuilds(t *testing.T) {
	var want []*unstructured.Unstructured
	for _, face := range release.Faces {
		b, err := release.Kustomize(root, face)
		require.NoError(t, err)
		want = append(want, decode(t, b)...)
	}
	got, exp := byKey(t, helmTemplate(t)), byKey(t, want)
	require.Equal(t, keys(exp), keys(got))
	for k := range exp {
		assert.Equal(t, exp[k], got[k], k)
	}
}

// With the release's image digest the chart is the release's install files, object for object;
// the apiserver takes them (server-side apply, as helm's field manager).
func TestChartWithTheDigestIsTheRelease(t *testing.T) {
	digest, err := os.ReadFile(filepath.Join(dist, "image", "digest"))
	require.NoError(t, err)
	rendered := helmTemplate(t, "image.repository="+repository, "image.digest="+strings.TrimSpace(string(digest)))
	var want []*unstructured.Unstructured
	for _, face := range release.Faces {
		want = append(want, objects(t, filepath.Join(dist, "install-"+face+".yaml"))...)
	}
	got, exp := byKey(t, rendered), byKey(t, want)
	require.Equal(t, keys(exp), keys(got))
	for k := range exp {
		assert.Equal(t, exp[k], got[k], k)
	}

	ensureNamespace(t, "argo")
	for _, u := range rendered {
		require.NoError(t, c.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("helm"), client.ForceOwnership),
			"applying %s %s", u.GetKind(), u.GetName())
	}
}

// Each value does what values.yaml says.
func TestChartValues(t *testing.T) {
	for _, tc := range []struct {
		name  string
		set   []string
		check func(t *testing.T, objs map[string]map[string]any)
	}{{
		name: "namespaces",
		set:  []string{"argo.namespace=ml", "tekton.namespace=trainstep"},
		check: func(t *testing.T, objs map[string]map[string]any) {
			assert.Contains(t, objs, "ConfigMap/ml/trainstep-executor-plugin")
			assert.Contains(t, objs, "Deployment/ml/trainstep-argo-janitor")
			assert.Contains(t, objs, "Namespace//trainstep")
			assert.Contains(t, objs, "Deployment/trainstep/trainstep-tekton-controller")
			subjects := objs["ClusterRoleBinding//trainstep-executor-plugin"]["subjects"].([]any)
			assert.Equal(t, "ml", subjects[0].(map[string]any)["namespace"])
		},
	}, {
		name: "image, replicas and resources",
		set: []string{"image.repository=registry.example/ts", "image.tag=v9", "tekton.controller.replicas=1",
			"argo.plugin.resources.limits.memory=1Gi", "argo.janitor.resources.requests.cpu=250m"},
		check: func(t *testing.T, objs map[string]map[string]any) {
			ctrl := objs["Deployment/trainstep-system/trainstep-tekton-controller"]
			assert.EqualValues(t, 1, ctrl["spec"].(map[string]any)["replicas"])
			assert.Equal(t, "registry.example/ts:v9", container(ctrl)["image"])
			sidecar := objs["ConfigMap/argo/trainstep-executor-plugin"]["data"].(map[string]any)["sidecar.container"].(map[string]any)
			assert.Equal(t, "registry.example/ts:v9", sidecar["image"])
			assert.Equal(t, "1Gi", sidecar["resources"].(map[string]any)["limits"].(map[string]any)["memory"])
			assert.Equal(t, "250m", container(objs["Deployment/argo/trainstep-argo-janitor"])["resources"].(map[string]any)["requests"].(map[string]any)["cpu"])
		},
	}, {
		name: "parts off",
		set:  []string{"tekton.enabled=false", "argo.janitor.enabled=false", "argo.admissionPolicy.enabled=false", "rbac.create=false"},
		check: func(t *testing.T, objs map[string]map[string]any) {
			for k := range objs {
				kind := strings.Split(k, "/")[0]
				assert.NotContains(t, []string{"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "Deployment", "Namespace",
					"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}, kind, k)
			}
			assert.Equal(t, []string{"ConfigMap/argo/trainstep-executor-plugin",
				"Secret/argo/trainstep-executor-plugin.service-account-token", "Secret/argo/trainstep-workflow.service-account-token",
				"ServiceAccount/argo/trainstep-executor-plugin", "ServiceAccount/argo/trainstep-workflow"}, keys(objs))
		},
	}} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, byKey(t, helmTemplate(t, tc.set...))) })
	}
}

// helm lint finds nothing wrong with the chart.
func TestChartLints(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), helm(t), "lint", "--strict", filepath.Join(root, "charts", "trainstep"))
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
}

func container(obj map[string]any) map[string]any {
	cs := obj["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)
	return cs[0].(map[string]any)
}
