package testenv

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadRuntimesSkipsNonRuntimeDocuments(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		path := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
	write("kustomization.yaml", "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [a.yaml, sub]\n")
	write("a.yaml", `# Copyright header
# only comments in this document
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: first
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: not-a-runtime
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata:
  name: second
`)
	write("sub/b.yaml", "# licence\n\napiVersion: trainer.kubeflow.org/v1alpha1\nkind: ClusterTrainingRuntime\nmetadata:\n  name: third\n")
	// Not named by the kustomization: an optional overlay a stock install leaves out.
	write("optional/kustomization.yaml", "resources: [c.yaml]\n")
	write("optional/c.yaml", "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: ClusterTrainingRuntime\nmetadata:\n  name: optional\n")
	write("notes.txt", "kind: ClusterTrainingRuntime\n")

	objs, err := readRuntimes(dir)
	require.NoError(t, err)

	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
	}
	assert.Equal(t, []string{
		"ClusterTrainingRuntime /first",
		"TrainingRuntime default/second",
		"ClusterTrainingRuntime /third",
	}, got)
}

func TestNamespacePrefix(t *testing.T) {
	cases := map[string]string{
		"TestFoo":         "testfoo-",
		"TestFoo/bar_baz": "testfoo-bar-baz-",
		"Test__":          "test-",
		"TestAVeryLongNameThatGoesOnAndOnAndOnPastTheLimitOfALabel/x": "testaverylongnamethatgoesonandonandonpastthelimitofalabel-",
	}
	for in, want := range cases {
		got := namespacePrefix(in)
		assert.Equal(t, want, got, in)
		assert.LessOrEqual(t, len(got)+5, 63, in)
	}
}
