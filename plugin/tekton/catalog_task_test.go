package tekton

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/manifest"
)

const (
	exampleTask    = "../../examples/workflows/tekton-train-task.yaml"
	exampleTaskRun = "../../examples/workflows/tekton-train-taskrun.yaml"
)

// exampleDocs are the documents of file as `kubectl apply -f` reads them, each as JSON, by kind.
func exampleDocs(t *testing.T, file string) map[string][][]byte {
	t.Helper()
	docs, err := manifest.Documents(file)
	require.NoError(t, err)
	byKind := map[string][][]byte{}
	for _, d := range docs {
		byKind[d.Kind] = append(byKind[d.Kind], d.JSON)
	}
	return byKind
}

// The catalog-style Task passes Tekton's own validation (SetDefaults, then Validate, as its
// admission webhook does), says the Tekton release it needs as the catalog does, declares only
// results that trainstep writes, and comes with the rights its pod needs; the TaskRun runs it
// with that ServiceAccount, binds its workspace, and can be created twice.
func TestExampleCatalogTaskValidates(t *testing.T) {
	docs := exampleDocs(t, exampleTask)
	require.Len(t, docs["Task"], 1)
	task := &tektonv1.Task{}
	require.NoError(t, sigsyaml.UnmarshalStrict(docs["Task"][0], task))
	task.SetDefaults(t.Context())
	require.Nil(t, task.Validate(t.Context()), "Tekton rejects the example Task")
	assert.Equal(t, "0.68.0", task.Annotations["tekton.dev/pipelines.minVersion"], "the oldest Tekton release proved (docs/compatibility.md)")
	for _, r := range task.Spec.Results {
		assert.Contains(t, trainjob.OutputNames, r.Name, "the Task declares result %s, which trainstep never writes", r.Name)
	}
	var sa string
	for kind, objs := range docs {
		var obj any
		switch kind {
		case "Task":
			continue
		case "ServiceAccount":
			require.Len(t, objs, 1)
			s := &corev1.ServiceAccount{}
			require.NoError(t, sigsyaml.UnmarshalStrict(objs[0], s))
			sa = s.Name
			continue
		case "Role":
			obj = &rbacv1.Role{}
		case "RoleBinding":
			obj = &rbacv1.RoleBinding{}
		case "ClusterRole":
			obj = &rbacv1.ClusterRole{}
		case "ClusterRoleBinding":
			obj = &rbacv1.ClusterRoleBinding{}
		default:
			t.Errorf("%s holds a %s, which this test does not check", exampleTask, kind)
			continue
		}
		for _, o := range objs {
			require.NoError(t, sigsyaml.UnmarshalStrict(o, obj), "%s: the %s", exampleTask, kind)
		}
	}
	require.NotEmpty(t, sa, "the Task file makes the ServiceAccount its pod runs as")

	runs := exampleDocs(t, exampleTaskRun)
	require.Equal(t, []string{"TaskRun"}, slices.Collect(maps.Keys(runs)))
	tr := &tektonv1.TaskRun{}
	require.NoError(t, sigsyaml.UnmarshalStrict(runs["TaskRun"][0], tr))
	assert.Empty(t, tr.Name, "a fixed name fails the second `kubectl create -f`; use generateName")
	tr.SetDefaults(t.Context())
	tr.Name = tr.GenerateName + "x" // the apiserver names it
	require.Nil(t, tr.Validate(t.Context()), "Tekton rejects the example TaskRun")
	require.NotNil(t, tr.Spec.TaskRef)
	assert.Equal(t, task.Name, tr.Spec.TaskRef.Name)
	assert.Equal(t, sa, tr.Spec.ServiceAccountName)
	for _, w := range task.Spec.Workspaces {
		bound := slices.ContainsFunc(tr.Spec.Workspaces, func(b tektonv1.WorkspaceBinding) bool { return b.Name == w.Name })
		assert.True(t, bound || w.Optional, "the Task needs workspace %q and the TaskRun binds none", w.Name)
	}
}
