package generate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// No file a user reads states a version of a system, or of trainstep, that its source does not.
func TestNoVersionClaimDisagreesWithItsSource(t *testing.T) {
	wrong, err := Disagreements(root)
	require.NoError(t, err)
	for _, d := range wrong {
		t.Error(d)
	}
	assert.Empty(t, wrong)
}

// Each way a file states a version is found and checked against its source: the claims the
// issue found disagreeing are each reported with file and line, and the ones that agree (a
// Trainer feature's own release among them) are not.
func TestScanFileFindsEachClaimThatDisagrees(t *testing.T) {
	for _, tc := range []struct {
		name, path, line string
		want             string // what the disagreement says the source says; "" when it agrees
	}{
		{"chart README's Argo", "charts/trainstep/README.md", "the Argo face needs Argo Workflows >= 3.7, the", "the oldest release proved is v3.6.12"},
		{"Tekton v1.x", "charts/trainstep/README.md", "Tekton face Tekton Pipelines v1.x.", "the releases proved are v0.68.0 and v1.3.0"},
		{"kubeVersion", "charts/trainstep/Chart.yaml", `kubeVersion: ">=1.30.0-0"`, "the oldest release proved is 1.33.13"},
		{"kubeVersion proved", "charts/trainstep/Chart.yaml", `kubeVersion: ">=1.33.0-0" # generated: x`, ""},
		{"the chart's version", "charts/trainstep/Chart.yaml", "version: 0.2.0", "the release being prepared is v0.3.0"},
		{"the Task's label", "examples/workflows/t.yaml", `    app.kubernetes.io/version: "0.3"`, "the release being prepared is v0.3.0"},
		{"a templated label", "charts/trainstep/templates/_helpers.tpl", `app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}`, ""},
		{"Tekton's minVersion", "examples/workflows/t.yaml", `    tekton.dev/pipelines.minVersion: "0.56.0"`, "the oldest release proved is v0.68.0"},
		{"the plugin's annotation", "manifests/argo/plugin.yaml", `    workflows.argoproj.io/version: '>= v3.4'`, "the oldest release proved is v3.6.12"},
		{"a release's chart file", "docs/install.md", "helm install trainstep trainstep-0.2.0.tgz -n x", "the release being prepared is v0.3.0"},
		{"a release's image", "plugin/tekton/README.md", "kustomize edit set image trainstep=registry.example.com/trainstep:v0.1.0", "the release being prepared is v0.3.0"},
		{"make release", "README.md", "make release VERSION=v0.2.0 RELEASE_REPOSITORY=r", "the release being prepared is v0.3.0"},
		{"an unproved release proved", "docs/install.md", "- **Argo Workflows** (proved on v3.6.12 and v3.5.0)", "the releases proved are v3.6.12, v3.7.3 and v4.0.7"},
		{"proved on the minimum", "docs/install.md", "**Kubernetes**: proved on 1.33.13 and 1.36.3. The Argo face's admission", ""},
		{"a Trainer range", "docs/architecture.md", "fields every supported Trainer has (v2.0.1 … v2.3.0)", ""},
		{"a Trainer range past the proved", "docs/architecture.md", "fields every supported Trainer has (v2.0.1 … v2.4.0)", "the Trainer releases proved are v2.0.1, v2.2.1 and v2.3.0"},
		{"a Trainer feature's release", "docs/outputs.md", "| `metrics` | Trainer v2.2+ `status.trainerStatus` |", ""},
		{"a Trainer release not proved", "examples/steps/x.yaml", "# Needs: Kubeflow Trainer v2.5 or later with its stock runtimes", "the Trainer releases proved are v2.0.1, v2.2.1 and v2.3.0"},
		{"Kueue's own version", "examples/steps/x.yaml", "# its TrainJob integration on (proved on Kueue v0.16.0) and a LocalQueue", "the Kueue release proved is v0.17.0"},
		{"an Argo range of what its code does", "docs/outputs.md", "no Argo release copies it (v3.7.3 … v4.1.2 `reconcileTaskSet` copies outputs)", "the releases proved are v3.6.12, v3.7.3 and v4.0.7"},
		{"an API's history, not a claim", "SECURITY.md", "(GA since Kubernetes 1.30, `failurePolicy: Fail`)", ""},
		{"Kubernetes' API group", "manifests/argo/admission-policy.yaml", "# admissionregistration.k8s.io/v1 >= 1.30", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := scanFile(tc.path, tc.line+"\n", testClaims())
			require.NoError(t, err)
			if tc.want == "" {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			assert.Equal(t, tc.path, got[0].File)
			assert.Equal(t, 1, got[0].Line)
			assert.Contains(t, got[0].Want, tc.want)
		})
	}
}

// A claim in a generated block is make generate's to keep right, not the scanner's; the prose's
// line before a claim says which system it is about when the claim starts its line.
func TestScanFileSkipsGeneratedBlocksAndReadsTheLineBefore(t *testing.T) {
	content := "<!-- generated: chart-needs -->\nNeeds Kubernetes >= 1.30\n<!-- end: chart-needs -->\n" +
		"the Argo face needs Argo\nWorkflows v3.7 or later.\n"
	got, err := scanFile("charts/trainstep/README.md", content, testClaims())
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, 5, got[0].Line)
	assert.Equal(t, "v3.7 or later", got[0].Says)
}

// A file with generated blocks that make generate does not know would never be remade.
func TestScanFileNamesBlocksOutsideTheClaimFiles(t *testing.T) {
	got, err := scanFile("docs/cost.md", "<!-- generated: chart-needs -->\n<!-- end: chart-needs -->\n", testClaims())
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Contains(t, got[0].Want, "claimFiles")
}
