package image_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// documentedRecipe is the container step that docs/cli.md gives (`executor run` in an Argo template;
// the README links to it), with Argo's variables filled in as Argo would.
func documentedRecipe(t *testing.T) corev1.Container {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "cli.md"))
	require.NoError(t, err)
	const start = "```yaml\ncontainer:\n"
	_, rest, ok := strings.Cut(string(b), start)
	require.True(t, ok, "docs/cli.md has no ```yaml block starting with container:")
	block, _, ok := strings.Cut(rest, "```")
	require.True(t, ok)
	block = strings.NewReplacer("{{node.name}}", "train", "{{workflow.uid}}", "0b9d6a3e-wf", "{{retries}}", "0").Replace(block)
	var recipe struct{ Container corev1.Container }
	require.NoError(t, yaml.UnmarshalStrict([]byte("container:\n"+block), &recipe))
	return recipe.Container
}

// docs/cli.md's container step, run from the image as written (its command, its env from the
// downward API, the image's user and a writable root as a plain container step has): the step
// succeeds and its outputs are files in --output-dir (/tmp/outputs in the recipe).
func TestDocumentedContainerStepRunsFromTheImage(t *testing.T) {
	recipe := documentedRecipe(t)
	ns := stack.Namespace(t)
	// The step pod: a real object, since the recipe makes it the TrainJob's owner.
	stepPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "train-1234"},
		Spec: corev1.PodSpec{ServiceAccountName: "step", Containers: []corev1.Container{{Name: "main", Image: recipe.Image}}}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "step"}}
	// docs/cli.md lists the rights a step pod needs; a test of those is test/e2e/cli's. Here: all.
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "image-e2e-step-" + ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "step"}}}
	require.NoError(t, c.Create(t.Context(), sa))
	require.NoError(t, c.Create(t.Context(), crb))
	t.Cleanup(func() { _ = c.Delete(t.Context(), crb) })
	require.NoError(t, c.Create(t.Context(), stepPod))

	stepFile := "framework: xgboost\ntrainer:\n  func: |\n    def train():\n        print(\"training\")\n"
	rootfs, cfg := amd64(t)
	r := start(t, rootfs, cfg, pod{Namespace: ns, Name: stepPod.Name, UID: string(stepPod.UID), ServiceAccount: "step",
		// The step file, as a ConfigMap volume would mount it.
		Files: []podFile{{Path: "/steps/train.yaml", Data: []byte(stepFile), Mode: 0o644}}}, recipe)
	require.Equal(t, 0, r.wait(t), r.Log.String())

	phase, err := os.ReadFile(filepath.Join(rootfs, "tmp", "outputs", trainjob.OutPhase))
	require.NoError(t, err, "the step wrote no %s output into /tmp/outputs:\n%s", trainjob.OutPhase, r.Log.String())
	assert.Equal(t, "Succeeded", strings.TrimSpace(string(phase)))
	tjs := testenv.TrainJobs(t.Context(), t, c, ns)
	require.Len(t, tjs, 1)
	require.Len(t, tjs[0].OwnerReferences, 1)
	assert.Equal(t, stepPod.UID, tjs[0].OwnerReferences[0].UID, "the recipe makes the step pod the TrainJob's owner")
}
