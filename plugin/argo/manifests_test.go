package argo_test

import (
	"os"
	"path/filepath"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	fakewf "github.com/argoproj/argo-workflows/v3/pkg/client/clientset/versioned/fake"
	"github.com/argoproj/argo-workflows/v3/pkg/plugins/spec"
	"github.com/argoproj/argo-workflows/v3/workflow/templateresolution"
	plugins "github.com/argoproj/argo-workflows/v3/workflow/util/plugins"
	"github.com/argoproj/argo-workflows/v3/workflow/validate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
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

// TestExamplesPassArgoValidation runs Argo's own workflow validation (what `argo lint` runs) on
// every example workflow.
func TestExamplesPassArgoValidation(t *testing.T) {
	files, err := filepath.Glob("../../examples/workflows/argo-*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	cs := fakewf.NewSimpleClientset()
	wftmpl := templateresolution.WrapWorkflowTemplateInterface(cs.ArgoprojV1alpha1().WorkflowTemplates(metav1.NamespaceDefault))
	cwftmpl := templateresolution.WrapClusterWorkflowTemplateInterface(cs.ArgoprojV1alpha1().ClusterWorkflowTemplates())
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			wf := &wfv1.Workflow{}
			require.NoError(t, yaml.UnmarshalStrict(b, wf))
			require.NoError(t, validate.ValidateWorkflow(wftmpl, cwftmpl, wf, nil, validate.ValidateOpts{Lint: true}))
		})
	}
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
