package image_test

// The chart (charts/trainstep) is written by hand, with names from the release and the release's
// namespace, so it cannot render manifests/ object for object. What it must not drift from is
// what makes a face work and what it may do: with the values that say what manifests/<face> says
// (release trainstep, the manifests' namespace, that face alone) it renders the same objects by
// kind, namespace and name, and in them the same RBAC rules and bindings, the same pod specs
// (containers' image, args, env, ports, probes, resources, security contexts), the same plugin
// ConfigMap and the same admission policy (essentials). The rest is the chart's own: each value
// does what README.md says, helm refuses what values.schema.json does not allow, and each face
// installed alone with the real helm runs a step from the image.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/internal/release"

	"github.com/trainstep/trainstep/test/internal/helmcmd"
)

// runHelm runs the real helm (helmcmd.Run).
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return helmcmd.Run(t, args...)
}

func chartDir() string { return filepath.Join(root, "charts", "trainstep") }

// chartRelease is one release of the chart: its name, namespace and values (YAML, as a user's
// values file; empty: the chart's defaults).
type chartRelease struct {
	name, namespace, values string
	// chart is the chart installed: charts/trainstep unless set (a packaged release's .tgz).
	chart string
}

func (r chartRelease) chartPath() string {
	if r.chart != "" {
		return r.chart
	}
	return chartDir()
}

// args are helm's flags for r: --namespace, and -f with its values.
func (r chartRelease) args(t *testing.T) []string {
	t.Helper()
	args := []string{"--namespace", r.namespace}
	if r.values != "" {
		// Not under t.TempDir(): its name is the test's, and helm splits -f at commas.
		f, err := os.CreateTemp("", "trainstep-values-*.yaml")
		require.NoError(t, err)
		t.Cleanup(func() { _ = os.Remove(f.Name()) })
		_, err = f.WriteString(r.values)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		args = append(args, "-f", f.Name())
	}
	return args
}

// helmTemplate renders the chart as r with the real helm, and returns the error helm reports.
func helmTemplate(t *testing.T, r chartRelease) ([]*unstructured.Unstructured, error) {
	t.Helper()
	out, err := runHelm(t, append([]string{"template", r.name, r.chartPath()}, r.args(t)...)...)
	if err != nil {
		return nil, err
	}
	return decode(t, []byte(out)), nil
}

func mustTemplate(t *testing.T, r chartRelease) map[string]map[string]any {
	t.Helper()
	objs, err := helmTemplate(t, r)
	require.NoError(t, err)
	return byKey(t, objs)
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
		ns := u.GetNamespace()
		if clusterScoped[u.GetKind()] {
			ns = "" // the apiserver drops it (kustomize sets one on the admission policy)
		}
		k := fmt.Sprintf("%s/%s/%s", u.GetKind(), ns, u.GetName())
		require.NotContains(t, m, k, "two objects %s", k)
		m[k] = o
	}
	return m
}

// clusterScoped are the kinds of cluster-scoped objects manifests/ and the chart have.
var clusterScoped = map[string]bool{"Namespace": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// essentials is what of obj makes its face work or bounds what it may do (the file's comment):
// nil for a ServiceAccount, whose existence is all. An object of a kind it does not know fails
// the test, so a new kind in manifests/ or the chart is compared once its essentials are said.
func essentials(t *testing.T, obj map[string]any) any {
	t.Helper()
	u := unstructured.Unstructured{Object: obj}
	switch u.GetKind() {
	case "ServiceAccount":
		return nil
	case "Role", "ClusterRole":
		return obj["rules"]
	case "RoleBinding", "ClusterRoleBinding":
		return map[string]any{"roleRef": obj["roleRef"], "subjects": obj["subjects"]}
	case "Deployment":
		tmpl := dig(obj, "spec", "template")
		return map[string]any{"replicas": dig(obj, "spec")["replicas"], "pod": tmpl["spec"], "annotations": dig(tmpl, "metadata")["annotations"]}
	case "ConfigMap": // the label by which Argo finds its plugins
		return map[string]any{"data": obj["data"], "annotations": u.GetAnnotations(),
			"configmap-type": u.GetLabels()["workflows.argoproj.io/configmap-type"]}
	case "Secret":
		return map[string]any{"type": obj["type"], "annotations": u.GetAnnotations()}
	case "Service": // where Prometheus scrapes; its selector is the chart's labels or the manifests'
		return dig(obj, "spec")["ports"]
	case "ValidatingAdmissionPolicy":
		return celSpaced(obj["spec"])
	case "ValidatingAdmissionPolicyBinding":
		return obj["spec"]
	}
	t.Errorf("%s %s: the test does not know what matters in a %s; say it in essentials", u.GetKind(), u.GetName(), u.GetKind())
	return nil
}

// celSpaced is v with each CEL expression's whitespace made one space: CEL ignores it, and two
// YAML parsers fold a `>-` scalar with more-indented lines differently (kustomize's keeps an
// empty line that helm's drops).
func celSpaced(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			if s, ok := e.(string); ok && k == "expression" {
				out[k] = strings.Join(strings.Fields(s), " ")
				continue
			}
			out[k] = celSpaced(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = celSpaced(e)
		}
		return out
	}
	return v
}

// assertSameEssentials checks that got (the chart) has want's objects (manifests/, a release's
// install file) and the same essentials in each. The manifests' Namespace is not the chart's to
// make: `helm install --create-namespace` makes the release's.
func assertSameEssentials(t *testing.T, want, got []*unstructured.Unstructured) {
	t.Helper()
	exp, have := byKey(t, want), byKey(t, got)
	for k := range exp {
		if strings.HasPrefix(k, "Namespace/") {
			delete(exp, k)
		}
	}
	require.Equal(t, keys(exp), keys(have), "the chart's objects are not manifests/'")
	for k := range exp {
		assert.Equal(t, essentials(t, exp[k]), essentials(t, have[k]), k)
	}
}

// faceNamespace is where manifests/<face> install its workloads: the namespace of its Deployment.
func faceNamespace(t *testing.T, objs []*unstructured.Unstructured) string {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == "Deployment" {
			return u.GetNamespace()
		}
	}
	require.Fail(t, "manifests/ have no Deployment")
	return ""
}

// faceAlone is the values that turn on face and nothing else.
func faceAlone(face string) string { return face + ":\n  enabled: true\n" }

// With the values that say what manifests/<face> says, the chart renders its objects with the
// same essentials: the chart and manifests/ cannot drift in what the faces do or may do.
func TestChartMatchesManifests(t *testing.T) {
	for _, face := range release.Faces {
		t.Run(face, func(t *testing.T) {
			b, err := release.Kustomize(root, face)
			require.NoError(t, err)
			want := decode(t, b)
			got, err := helmTemplate(t, chartRelease{name: "trainstep", namespace: faceNamespace(t, want), values: faceAlone(face)})
			require.NoError(t, err)
			assertSameEssentials(t, want, got)
		})
	}
}

// With the release's image digest, each face of the chart has the release's install file's
// essentials.
func TestChartWithTheDigestIsTheRelease(t *testing.T) {
	digest, err := os.ReadFile(filepath.Join(dist, "image", "digest"))
	require.NoError(t, err)
	for _, face := range release.Faces {
		t.Run(face, func(t *testing.T) {
			want := objects(t, filepath.Join(dist, "install-"+face+".yaml"))
			got, err := helmTemplate(t, chartRelease{name: "trainstep", namespace: faceNamespace(t, want),
				values: faceAlone(face) + "image: {repository: " + repository + ", digest: " + strings.TrimSpace(string(digest)) + "}\n"})
			require.NoError(t, err)
			assertSameEssentials(t, want, got)
		})
	}
}

// helm lint --strict finds nothing wrong with either face or both, nor with the defaults: lint
// takes `fail` for a no-op, so the chart as packaged lints though it installs nothing by default.
func TestChartLints(t *testing.T) {
	for name, values := range map[string]string{
		"argo":     faceAlone("argo"),
		"tekton":   faceAlone("tekton"),
		"both":     faceAlone("argo") + faceAlone("tekton"),
		"defaults": "",
	} {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"lint", "--strict", chartDir()}, chartRelease{namespace: "trainstep-system", values: values}.args(t)...)
			out, err := runHelm(t, args...)
			require.NoError(t, err, out)
		})
	}
}

// Each value does what README.md says, and values.schema.json refuses what is not a value.
func TestChartValues(t *testing.T) {
	appVersion := chartAppVersion(t)
	for _, tc := range []struct {
		name   string
		values string
		// check the rendered objects, by kind/namespace/name; or wantErr, each in helm's error.
		check   func(t *testing.T, objs map[string]map[string]any)
		wantErr []string
	}{{
		name:    "neither face",
		wantErr: []string{"set argo.enabled=true", "tekton.enabled=true"},
	}, {
		name:   "argo alone",
		values: faceAlone("argo"),
		check: func(t *testing.T, objs map[string]map[string]any) {
			assert.Equal(t, []string{
				"ClusterRole//ml-trainstep-argo-janitor", "ClusterRole//ml-trainstep-executor-plugin",
				"ClusterRoleBinding//ml-trainstep-argo-janitor", "ClusterRoleBinding//ml-trainstep-executor-plugin",
				"ConfigMap/ml/trainstep-executor-plugin",
				"Deployment/ops/ml-trainstep-argo-janitor",
				"Role/ml/ml-trainstep-executor-plugin", "Role/ml/ml-trainstep-workflow", "Role/ops/ml-trainstep-argo-janitor-leader-election",
				"RoleBinding/ml/ml-trainstep-executor-plugin", "RoleBinding/ml/ml-trainstep-workflow", "RoleBinding/ops/ml-trainstep-argo-janitor-leader-election",
				"Secret/ml/trainstep-executor-plugin.service-account-token", "Secret/ml/trainstep-workflow.service-account-token",
				"Service/ops/ml-trainstep-argo-janitor-metrics",
				"ServiceAccount/ml/trainstep-executor-plugin", "ServiceAccount/ml/trainstep-workflow", "ServiceAccount/ops/ml-trainstep-argo-janitor",
				"ValidatingAdmissionPolicy//ml-trainstep-executor-plugin-trainjobs", "ValidatingAdmissionPolicyBinding//ml-trainstep-executor-plugin-trainjobs",
			}, keys(objs))
		},
	}, {
		name:   "tekton alone, in the release's namespace",
		values: faceAlone("tekton"),
		check: func(t *testing.T, objs map[string]map[string]any) {
			assert.Equal(t, []string{
				"ClusterRole//ml-trainstep-tekton-controller", "ClusterRoleBinding//ml-trainstep-tekton-controller",
				"Deployment/ops/ml-trainstep-tekton-controller",
				"Role/ops/ml-trainstep-tekton-controller-leader-election", "RoleBinding/ops/ml-trainstep-tekton-controller-leader-election",
				"Service/ops/ml-trainstep-tekton-controller-metrics", "ServiceAccount/ops/ml-trainstep-tekton-controller",
			}, keys(objs))
			subjects := objs["ClusterRoleBinding//ml-trainstep-tekton-controller"]["subjects"]
			assert.Equal(t, []any{map[string]any{"kind": "ServiceAccount", "name": "ml-trainstep-tekton-controller", "namespace": "ops"}}, subjects)
		},
	}, {
		name:   "both faces",
		values: faceAlone("argo") + faceAlone("tekton"),
		check: func(t *testing.T, objs map[string]map[string]any) {
			assert.Contains(t, objs, "Deployment/ops/ml-trainstep-argo-janitor")
			assert.Contains(t, objs, "Deployment/ops/ml-trainstep-tekton-controller")
			assert.Contains(t, objs, "ConfigMap/ml/trainstep-executor-plugin")
			for k := range objs {
				assert.False(t, strings.HasPrefix(k, "ServiceMonitor/"), "no ServiceMonitor unless asked for: %s", k)
			}
		},
	}, {
		name:   "a ServiceMonitor for each metrics Service",
		values: faceAlone("argo") + faceAlone("tekton") + "metrics: {serviceMonitor: {enabled: true, interval: 30s, labels: {release: prom}}}\n",
		check:  checkServiceMonitors,
	}, {
		name:    "schema: a ServiceMonitor interval that is no duration",
		values:  faceAlone("tekton") + "metrics: {serviceMonitor: {enabled: true, interval: 30}}\n",
		wantErr: []string{"/metrics/serviceMonitor/interval"},
	}, {
		name:   "argo in a list of namespaces",
		values: "argo: {enabled: true, namespaces: [ml, research]}\n",
		check: func(t *testing.T, objs map[string]map[string]any) {
			var subjects []any
			for _, ns := range []string{"ml", "research"} {
				for _, k := range []string{"ConfigMap/%s/trainstep-executor-plugin", "ServiceAccount/%s/trainstep-executor-plugin",
					"Secret/%s/trainstep-executor-plugin.service-account-token", "ServiceAccount/%s/trainstep-workflow",
					"Secret/%s/trainstep-workflow.service-account-token", "Role/%s/ml-trainstep-executor-plugin",
					"RoleBinding/%s/ml-trainstep-executor-plugin", "Role/%s/ml-trainstep-workflow", "RoleBinding/%s/ml-trainstep-workflow"} {
					assert.Contains(t, objs, fmt.Sprintf(k, ns))
				}
				subjects = append(subjects, map[string]any{"kind": "ServiceAccount", "name": "trainstep-executor-plugin", "namespace": ns})
			}
			assert.NotContains(t, objs, "ConfigMap/argo/trainstep-executor-plugin")
			assert.Equal(t, subjects, objs["ClusterRoleBinding//ml-trainstep-executor-plugin"]["subjects"])
		},
	}, {
		name:    "argo in Argo's controller namespace, not asked for",
		values:  "argo: {enabled: true, namespaces: [ml, argo]}\n",
		wantErr: []string{"argo.namespaces lists argo, Argo's controller namespace (argo.controllerNamespace)", "set argo.pluginInControllerNamespace=true"},
	}, {
		name:    "argo in another controller namespace, not asked for",
		values:  "argo: {enabled: true, namespaces: [ml, workflows], controllerNamespace: workflows}\n",
		wantErr: []string{"argo.namespaces lists workflows, Argo's controller namespace"},
	}, {
		name:   "argo in Argo's controller namespace, asked for",
		values: "argo: {enabled: true, namespaces: [ml, research], pluginInControllerNamespace: true}\n",
		check: func(t *testing.T, objs map[string]map[string]any) {
			var configMaps []string
			for k := range objs {
				if strings.HasPrefix(k, "ConfigMap/") {
					configMaps = append(configMaps, k)
				}
			}
			assert.Equal(t, []string{"ConfigMap/argo/trainstep-executor-plugin"}, configMaps, "the plugin in the controller's namespace alone")
			for _, ns := range []string{"ml", "research"} {
				for _, k := range []string{"ServiceAccount/%s/trainstep-executor-plugin", "Secret/%s/trainstep-executor-plugin.service-account-token",
					"ServiceAccount/%s/trainstep-workflow", "Secret/%s/trainstep-workflow.service-account-token",
					"RoleBinding/%s/ml-trainstep-executor-plugin", "RoleBinding/%s/ml-trainstep-workflow"} {
					assert.Contains(t, objs, fmt.Sprintf(k, ns), "what the agent pod needs in each workflow namespace")
				}
			}
			assert.NotContains(t, objs, "ServiceAccount/argo/trainstep-executor-plugin", "the controller's namespace is not listed")
		},
	}, {
		name:   "the tag defaults to the chart's appVersion",
		values: faceAlone("argo") + faceAlone("tekton") + "image: {repository: registry.example/ts}\n",
		check: func(t *testing.T, objs map[string]map[string]any) {
			assert.Equal(t, map[string]string{"janitor": "registry.example/ts:" + appVersion, "controller": "registry.example/ts:" + appVersion,
				"sidecar": "registry.example/ts:" + appVersion}, images(objs))
		},
	}, {
		name:   "a tag",
		values: faceAlone("tekton") + "image: {tag: v9}\n",
		check: func(t *testing.T, objs map[string]map[string]any) {
			assert.Equal(t, map[string]string{"controller": "trainstep:v9"}, images(objs))
		},
	}, {
		name:   "a digest",
		values: faceAlone("tekton") + "image: {tag: v9, digest: sha256:" + strings.Repeat("ab", 32) + ", pullPolicy: Always}\n",
		check: func(t *testing.T, objs map[string]map[string]any) {
			assert.Equal(t, map[string]string{"controller": "trainstep@sha256:" + strings.Repeat("ab", 32)}, images(objs))
			assert.Equal(t, "Always", container(objs["Deployment/ops/ml-trainstep-tekton-controller"])["imagePullPolicy"])
		},
	}, {
		name:   "pod placement, security and extras of each Deployment",
		values: placementValues,
		check:  checkPlacement,
	}, {
		name: "the plugin's sidecar: resources, security, extras",
		values: `argo:
  enabled: true
  plugin:
    resources: {limits: {memory: 1Gi}}
    goMemLimit: 900MiB
    securityContext: {runAsUser: 8737, runAsGroup: 0, runAsNonRoot: true, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}, seccompProfile: {type: RuntimeDefault}}
    extraArgs: [--hold-max=20s]
    extraEnv: [{name: HTTPS_PROXY, value: "http://proxy:3128"}]
`,
		check: func(t *testing.T, objs map[string]map[string]any) {
			sidecar := objs["ConfigMap/ml/trainstep-executor-plugin"]["data"].(map[string]any)["sidecar.container"].(map[string]any)
			assert.Equal(t, []any{"argo-plugin", "--addr=:7356", "--metrics-addr=127.0.0.1:7357", "--hold-max=20s"}, sidecar["args"])
			env := sidecar["env"].([]any)
			assert.Equal(t, map[string]any{"name": "GOMEMLIMIT", "value": "900MiB"}, env[len(env)-2])
			assert.Equal(t, map[string]any{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}, env[len(env)-1])
			assert.Equal(t, map[string]any{"type": "RuntimeDefault"}, sidecar["securityContext"].(map[string]any)["seccompProfile"])
			assert.Equal(t, "1Gi", dig(sidecar, "resources", "limits")["memory"])
		},
	}, {
		name:   "parts off",
		values: "argo: {enabled: true, janitor: {enabled: false}, admissionPolicy: {enabled: false}}\nrbac: {create: false}\n",
		check: func(t *testing.T, objs map[string]map[string]any) {
			assert.Equal(t, []string{"ConfigMap/ml/trainstep-executor-plugin",
				"Secret/ml/trainstep-executor-plugin.service-account-token", "Secret/ml/trainstep-workflow.service-account-token",
				"ServiceAccount/ml/trainstep-executor-plugin", "ServiceAccount/ml/trainstep-workflow"}, keys(objs))
		},
	}, {
		name:   "fullnameOverride",
		values: faceAlone("tekton") + "fullnameOverride: ts\n",
		check: func(t *testing.T, objs map[string]map[string]any) {
			assert.Contains(t, objs, "Deployment/ops/ts-tekton-controller")
			assert.Contains(t, objs, "ClusterRole//ts-tekton-controller")
		},
	}, {
		name:    "schema: a string for a boolean",
		values:  "argo: {enabled: \"yes\"}\n",
		wantErr: []string{"/argo/enabled", "want boolean"},
	}, {
		name:    "schema: an unknown key (the generated chart's argo.namespace)",
		values:  "argo: {enabled: true, namespace: ml}\n",
		wantErr: []string{"/argo", "'namespace' not allowed"},
	}, {
		name:    "schema: an unknown top-level key",
		values:  faceAlone("tekton") + "tolerations: []\n",
		wantErr: []string{"'tolerations' not allowed"},
	}, {
		name:    "schema: no Argo namespace",
		values:  "argo: {enabled: true, namespaces: []}\n",
		wantErr: []string{"/argo/namespaces"},
	}, {
		name:    "argo without namespaces",
		values:  "argo: {enabled: true, namespaces: null}\n",
		wantErr: []string{"argo.namespaces names no namespace"},
	}, {
		name:    "schema: a digest that is not one",
		values:  faceAlone("tekton") + "image: {digest: latest}\n",
		wantErr: []string{"/image/digest"},
	}, {
		name:    "schema: a malformed GOMEMLIMIT",
		values:  "tekton: {enabled: true, controller: {goMemLimit: 400M}}\n",
		wantErr: []string{"/tekton/controller/goMemLimit"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := helmTemplate(t, chartRelease{name: "ml", namespace: "ops", values: tc.values})
			if tc.wantErr != nil {
				require.Error(t, err)
				for _, s := range tc.wantErr {
					assert.ErrorContains(t, err, s)
				}
				return
			}
			require.NoError(t, err)
			m := byKey(t, objs)
			for k, o := range m {
				u := unstructured.Unstructured{Object: o}
				assert.Equal(t, "ml", u.GetLabels()["app.kubernetes.io/instance"], "%s has no release label", k)
			}
			tc.check(t, m)
		})
	}
}

// Two releases have distinct objects but Argo's own names in a workflow namespace (the plugin's
// ConfigMap, ServiceAccounts and token Secrets), which Argo finds by name: a second release with
// the Argo face in a namespace of the first is refused by name.
func TestChartNamesFollowTheRelease(t *testing.T) {
	both := faceAlone("argo") + faceAlone("tekton")
	a := mustTemplate(t, chartRelease{name: "a", namespace: "a-ns", values: both})
	b := mustTemplate(t, chartRelease{name: "b", namespace: "b-ns", values: both})
	var common []string
	for k := range a {
		if _, ok := b[k]; ok {
			common = append(common, k)
		}
	}
	sort.Strings(common)
	assert.Equal(t, []string{"ConfigMap/ml/trainstep-executor-plugin",
		"Secret/ml/trainstep-executor-plugin.service-account-token", "Secret/ml/trainstep-workflow.service-account-token",
		"ServiceAccount/ml/trainstep-executor-plugin", "ServiceAccount/ml/trainstep-workflow"}, common)
}

// Each face installed alone with the real helm, as a user would (helm install -n NS
// --create-namespace, the release's image digest, a release name of its own), runs a step from
// the image as the chart's ServiceAccounts with the chart's RBAC; a second release with the
// Argo face in the same workflow namespace is refused.
func TestChartInstallsEachFaceAlone(t *testing.T) {
	digest, err := os.ReadFile(filepath.Join(dist, "image", "digest"))
	require.NoError(t, err)
	image := "image: {repository: " + repository + ", digest: " + strings.TrimSpace(string(digest)) + "}\n"

	t.Run("tekton", func(t *testing.T) {
		helmInstall(t, chartRelease{name: "ml", namespace: "chart-tekton", values: faceAlone("tekton") + image})
		tektonRunsAStep(t, "chart-tekton", "ml-trainstep-tekton-controller", releaseImage(t))
	})
	t.Run("argo", func(t *testing.T) {
		workflows := stack.Namespace(t)
		values := "argo: {enabled: true, namespaces: [" + workflows + "]}\n" + image
		helmInstall(t, chartRelease{name: "ml", namespace: "chart-argo", values: values})
		argoRunsAStep(t, workflows, "chart-argo", "ml-trainstep-argo-janitor", releaseImage(t))

		second := chartRelease{name: "research", namespace: "chart-argo-2", values: values}
		_, err := runHelm(t, append([]string{"install", second.name, chartDir(), "--kubeconfig", stack.Kubeconfig, "--create-namespace"}, second.args(t)...)...)
		require.Error(t, err, "a second release installed the Argo plugin where the first had")
		// The first of Argo's names helm meets (the ServiceAccount, then the ConfigMap, …).
		assert.ErrorContains(t, err, `"trainstep-executor-plugin" in namespace "`+workflows+`" exists and cannot be imported into the current release`)
	})
}

// helmInstall installs r into the test's apiserver (helm install -n NS --create-namespace), and
// uninstalls it when the test ends unless the test did.
func helmInstall(t *testing.T, r chartRelease) {
	t.Helper()
	out, err := runHelm(t, append([]string{"install", r.name, r.chartPath(), "--kubeconfig", stack.Kubeconfig, "--create-namespace"}, r.args(t)...)...)
	require.NoError(t, err)
	assert.Contains(t, out, "is installed as release "+r.name, "NOTES.txt")
	t.Cleanup(func() {
		// t.Context() is already cancelled when cleanups run.
		cmd := exec.CommandContext(context.WithoutCancel(t.Context()), helmcmd.Binary(t), "uninstall", r.name, "--namespace", r.namespace, "--kubeconfig", stack.Kubeconfig,
			"--ignore-not-found")
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("helm uninstall %s: %v\n%s", r.name, err, b)
		}
	})
}

// placementValues set every pod-level and container value of both Deployments, the same for
// each (a YAML anchor). Maps merge with the defaults, so the security contexts name every
// default key: what is rendered is then exactly what is set.
const placementValues = `imagePullSecrets: [{name: regcred}]
argo:
  enabled: true
  janitor: &pod
    nodeSelector: {pool: system}
    tolerations: [{key: dedicated, operator: Equal, value: system, effect: NoSchedule}]
    affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: arch, operator: In, values: [amd64]}]}]}}}
    priorityClassName: system-cluster-critical
    podAnnotations: {example.com/team: ml}
    podSecurityContext: {runAsNonRoot: true, runAsUser: 1000, fsGroup: 1000, seccompProfile: {type: RuntimeDefault}}
    securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}, runAsGroup: 1000}
    extraArgs: [--kube-api-qps=50]
    extraEnv: [{name: HTTPS_PROXY, value: "http://proxy:3128"}]
tekton:
  enabled: true
  controller: *pod
`

func checkPlacement(t *testing.T, objs map[string]map[string]any) {
	t.Helper()
	var values map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(placementValues), &values))
	set := dig(values, "argo", "janitor")
	for _, k := range []string{"Deployment/ops/ml-trainstep-argo-janitor", "Deployment/ops/ml-trainstep-tekton-controller"} {
		require.Contains(t, objs, k)
		pod := dig(objs[k], "spec", "template", "spec")
		assert.Equal(t, values["imagePullSecrets"], pod["imagePullSecrets"], k)
		for field, value := range map[string]string{"nodeSelector": "nodeSelector", "tolerations": "tolerations", "affinity": "affinity",
			"priorityClassName": "priorityClassName", "securityContext": "podSecurityContext"} {
			assert.Equal(t, set[value], pod[field], "%s: %s", k, field)
		}
		assert.Equal(t, "ml", dig(objs[k], "spec", "template", "metadata", "annotations")["example.com/team"], k)
		c := container(objs[k])
		assert.Equal(t, set["securityContext"], c["securityContext"], k)
		args := c["args"].([]any)
		assert.Equal(t, "--kube-api-qps=50", args[len(args)-1], "%s: the extra arg comes last", k)
		env := c["env"].([]any)
		assert.Equal(t, set["extraEnv"].([]any)[0], env[len(env)-1], "%s: the extra env comes last", k)
		assert.True(t, slices.ContainsFunc(env, func(e any) bool { return e.(map[string]any)["name"] == "GOMEMLIMIT" }), "%s keeps GOMEMLIMIT", k)
	}
	assert.Equal(t, "8080", dig(objs["Deployment/ops/ml-trainstep-tekton-controller"], "spec", "template", "metadata", "annotations")["prometheus.io/port"],
		"the controller keeps its prometheus annotations beside podAnnotations")
}

// checkServiceMonitors: the janitor's and the Tekton controller's ServiceMonitors select their
// metrics Service, which selects the Deployment's pods and names the port their /metrics is on;
// the values' interval and labels are on each.
func checkServiceMonitors(t *testing.T, objs map[string]map[string]any) {
	t.Helper()
	for _, part := range []string{"argo-janitor", "tekton-controller"} {
		name := "ml-trainstep-" + part
		sm, svc, deploy := objs["ServiceMonitor/ops/"+name], objs["Service/ops/"+name+"-metrics"], objs["Deployment/ops/"+name]
		require.NotNil(t, sm, part)
		require.NotNil(t, svc, part)
		assert.Equal(t, "monitoring.coreos.com/v1", sm["apiVersion"])
		assert.Equal(t, "prom", dig(sm, "metadata", "labels")["release"], part)
		svcLabels := dig(svc, "metadata", "labels")
		for k, v := range dig(sm, "spec", "selector", "matchLabels") {
			assert.Equal(t, v, svcLabels[k], "%s: the ServiceMonitor selects the Service by %s", part, k)
		}
		assert.Equal(t, []any{"ops"}, dig(sm, "spec", "namespaceSelector")["matchNames"], part)
		assert.Equal(t, []any{map[string]any{"port": "metrics", "path": "/metrics", "interval": "30s"}}, dig(sm, "spec")["endpoints"], part)
		podLabels := dig(deploy, "spec", "template", "metadata", "labels")
		for k, v := range dig(svc, "spec", "selector") {
			assert.Equal(t, v, podLabels[k], "%s: the Service selects the pods by %s", part, k)
		}
		assert.Equal(t, []any{map[string]any{"name": "metrics", "port": float64(8080), "targetPort": "metrics"}}, dig(svc, "spec")["ports"], part)
		c := container(deploy)
		assert.Contains(t, c["args"], "--metrics-bind-address=:8080", "%s serves /metrics beyond loopback", part)
		assert.Contains(t, c["ports"], map[string]any{"name": "metrics", "containerPort": float64(8080)}, part)
	}
}

// images are the images of the rendered janitor, Tekton controller and plugin sidecar, by part.
func images(objs map[string]map[string]any) map[string]string {
	out := map[string]string{}
	for k, o := range objs {
		switch {
		case strings.HasPrefix(k, "Deployment/") && strings.HasSuffix(k, "-argo-janitor"):
			out["janitor"] = container(o)["image"].(string)
		case strings.HasPrefix(k, "Deployment/") && strings.HasSuffix(k, "-tekton-controller"):
			out["controller"] = container(o)["image"].(string)
		case strings.HasPrefix(k, "ConfigMap/"):
			out["sidecar"] = o["data"].(map[string]any)["sidecar.container"].(map[string]any)["image"].(string)
		}
	}
	return out
}

// chartAppVersion is Chart.yaml's appVersion.
func chartAppVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir(), "Chart.yaml"))
	require.NoError(t, err)
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	require.NoError(t, yaml.Unmarshal(b, &chart))
	require.NotEmpty(t, chart.AppVersion, "Chart.yaml has no appVersion")
	return chart.AppVersion
}

func container(obj map[string]any) map[string]any {
	cs := dig(obj, "spec", "template", "spec")["containers"].([]any)
	return cs[0].(map[string]any)
}

// dig is obj's map at path, nil where there is none.
func dig(obj map[string]any, path ...string) map[string]any {
	for _, p := range path {
		obj, _ = obj[p].(map[string]any)
	}
	return obj
}

// The chart `make release` packages (dist/trainstep-<version>.tgz) is stamped with the release:
// installed with nothing but a face turned on, it runs the release's image, pinned by digest,
// and it passes helm lint --strict as packaged.
func TestReleasedChartRunsTheReleaseImage(t *testing.T) {
	pkg := filepath.Join(dist, "trainstep-"+strings.TrimPrefix(stampVersion, "v")+".tgz")
	require.FileExists(t, pkg, "make release packages the chart")
	out, err := runHelm(t, "lint", "--strict", pkg)
	require.NoError(t, err, out)
	out, err = runHelm(t, "show", "chart", pkg)
	require.NoError(t, err)
	assert.Contains(t, out, "\nappVersion: "+stampVersion+"\n")
	assert.Contains(t, out, "\nversion: "+strings.TrimPrefix(stampVersion, "v")+"\n")

	helmInstall(t, chartRelease{name: "rel", namespace: "chart-released", values: "tekton: {enabled: true}\n", chart: pkg})
	tektonRunsAStep(t, "chart-released", "rel-trainstep-tekton-controller", releaseImage(t))
}
