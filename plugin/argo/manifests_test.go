package argo_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/argoproj/argo-workflows/v3/cmd/argo/commands/executorplugin"
	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	fakewf "github.com/argoproj/argo-workflows/v3/pkg/client/clientset/versioned/fake"
	"github.com/argoproj/argo-workflows/v3/pkg/plugins/spec"
	"github.com/argoproj/argo-workflows/v3/workflow/templateresolution"
	plugins "github.com/argoproj/argo-workflows/v3/workflow/util/plugins"
	"github.com/argoproj/argo-workflows/v3/workflow/validate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/internal/manifest"
)

const manifests = "../../manifests/argo"

// TestPluginConfigMapIsWhatArgoBuilds: the committed ConfigMap is what `argo executor-plugin
// build` makes from plugin.yaml (the same Argo function; internal/generate writes the file and
// checks it is current), and Argo reads it back.
func TestPluginConfigMapIsWhatArgoBuilds(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(manifests, "plugin.yaml"))
	require.NoError(t, err)
	p := &spec.Plugin{}
	require.NoError(t, yaml.UnmarshalStrict(b, p), "plugin.yaml must parse strictly, as `argo executor-plugin build` does")
	require.Equal(t, "ExecutorPlugin", p.Kind)
	want, err := plugins.ToConfigMap(p)
	require.NoError(t, err, "Argo's validation of the sidecar")
	path := filepath.Join(manifests, "trainstep-executor-plugin-configmap.yaml")
	b, err = os.ReadFile(path)
	require.NoError(t, err)
	got := &corev1.ConfigMap{}
	require.NoError(t, yaml.UnmarshalStrict(b, got))
	assert.Equal(t, want.Labels, got.Labels)
	assert.Equal(t, want.Annotations, got.Annotations)
	assert.Equal(t, want.Data, got.Data, "regenerate with: make generate")
	assert.Equal(t, "trainstep-executor-plugin", got.Name)

	back, err := plugins.FromConfigMap(got)
	require.NoError(t, err, "Argo's controller must read the ConfigMap")
	assert.Equal(t, "trainstep", back.Name)
	assert.True(t, back.Spec.Sidecar.AutomountServiceAccountToken)
	sc := back.Spec.Sidecar.Container.SecurityContext
	require.NotNil(t, sc)
	readable := (sc.RunAsUser != nil && *sc.RunAsUser == 8737) || (sc.RunAsGroup != nil && *sc.RunAsGroup == 0)
	assert.True(t, readable, "the sidecar must run as uid 8737 or gid 0 to read /var/run/argo/token")
}

// TestExamplesPassArgoValidation runs Argo's own validation (what `argo lint` runs) on every
// document of every example workflow file, as `kubectl apply -f` reads them: each Workflow and
// WorkflowTemplate (the templates first, so that a templateRef finds them), and the other
// objects (the rights a template's pod needs) parse strictly as their kinds.
func TestExamplesPassArgoValidation(t *testing.T) {
	files, err := filepath.Glob("../../examples/workflows/argo-*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			cs := fakewf.NewSimpleClientset()
			wftmpl := templateresolution.WrapWorkflowTemplateInterface(cs.ArgoprojV1alpha1().WorkflowTemplates(metav1.NamespaceDefault))
			cwftmpl := templateresolution.WrapClusterWorkflowTemplateInterface(cs.ArgoprojV1alpha1().ClusterWorkflowTemplates())
			var wfs []*wfv1.Workflow
			var tmpls []*wfv1.WorkflowTemplate
			docs, err := manifest.Documents(f)
			require.NoError(t, err)
			for _, d := range docs {
				doc := d.JSON
				switch kind := d.Kind; kind {
				case "Workflow":
					wf := &wfv1.Workflow{}
					require.NoError(t, yaml.UnmarshalStrict(doc, wf))
					wfs = append(wfs, wf)
				case "WorkflowTemplate":
					tmpl := &wfv1.WorkflowTemplate{}
					require.NoError(t, yaml.UnmarshalStrict(doc, tmpl))
					_, err := cs.ArgoprojV1alpha1().WorkflowTemplates(metav1.NamespaceDefault).Create(t.Context(), tmpl, metav1.CreateOptions{})
					require.NoError(t, err)
					tmpls = append(tmpls, tmpl)
				default:
					obj, ok := rightsKinds[kind]
					require.True(t, ok, "%s: a %s document, which this test does not know how to check", f, kind)
					require.NoError(t, yaml.UnmarshalStrict(doc, obj()), "%s: the %s", f, kind)
				}
			}
			require.Positive(t, len(wfs)+len(tmpls), "%s has no workflow", f)
			for _, wf := range wfs {
				require.NoError(t, validate.ValidateWorkflow(wftmpl, cwftmpl, wf, nil, validate.ValidateOpts{Lint: true}))
			}
			for _, tmpl := range tmpls {
				require.NoError(t, validate.ValidateWorkflowTemplate(wftmpl, cwftmpl, tmpl, nil, validate.ValidateOpts{Lint: true}), "WorkflowTemplate %s", tmpl.Name)
			}
		})
	}
}

// rightsKinds are the other kinds an example file may hold: what its pods run as.
var rightsKinds = map[string]func() any{
	"ServiceAccount":     func() any { return &corev1.ServiceAccount{} },
	"Role":               func() any { return &rbacv1.Role{} },
	"RoleBinding":        func() any { return &rbacv1.RoleBinding{} },
	"ClusterRole":        func() any { return &rbacv1.ClusterRole{} },
	"ClusterRoleBinding": func() any { return &rbacv1.ClusterRoleBinding{} },
}

// TestValidationCatchesABrokenExample proves the check above can fail: a reference to an output
// the train step does not declare.
func TestValidationCatchesABrokenExample(t *testing.T) {
	b, err := os.ReadFile("../../examples/workflows/argo-train-dag.yaml")
	require.NoError(t, err)
	wf := &wfv1.Workflow{}
	require.NoError(t, yaml.UnmarshalStrict(b, wf))
	for i := range wf.Spec.Templates {
		if wf.Spec.Templates[i].Name == "train" {
			wf.Spec.Templates[i].Outputs.Parameters = nil
		}
	}
	cs := fakewf.NewSimpleClientset()
	err = validate.ValidateWorkflow(
		templateresolution.WrapWorkflowTemplateInterface(cs.ArgoprojV1alpha1().WorkflowTemplates(metav1.NamespaceDefault)),
		templateresolution.WrapClusterWorkflowTemplateInterface(cs.ArgoprojV1alpha1().ClusterWorkflowTemplates()),
		wf, nil, validate.ValidateOpts{Lint: true})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "trainjob-name")
}

// TestArgoBuildOfThePluginDirMakesTheCommittedConfigMap runs Argo's own `argo executor-plugin
// build` on a copy of manifests/argo's plugin.yaml: the ConfigMap it writes is the committed one,
// byte for byte, so a user who sets the image in plugin.yaml and runs Argo's command gets exactly
// what make generate would make. The README.md it writes beside it is Argo's stock page, whose
// install is the ConfigMap alone; the committed one is trainstep's (internal/generate), with the
// whole install.
func TestArgoBuildOfThePluginDirMakesTheCommittedConfigMap(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(manifests, "plugin.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "plugin.yaml"), b, 0o644))
	cmd := executorplugin.NewBuildCommand()
	cmd.SetArgs([]string{dir})
	require.NoError(t, cmd.Execute())
	const name = "trainstep-executor-plugin-configmap.yaml"
	built, err := os.ReadFile(filepath.Join(dir, name))
	require.NoError(t, err, "argo executor-plugin build wrote no %s", name)
	committed, err := os.ReadFile(filepath.Join(manifests, name))
	require.NoError(t, err)
	assert.Equal(t, string(built), string(committed), "%s: regenerate with make generate", name)
}
