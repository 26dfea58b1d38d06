package restmapping

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// counting is a DefaultRESTMapper that counts the mappings asked of it.
type counting struct {
	*meta.DefaultRESTMapper
	asked int
}

func (c *counting) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	c.asked++
	return c.DefaultRESTMapper.RESTMapping(gk, versions...)
}

var (
	trainJobs = schema.GroupVersionKind{Group: "trainer.kubeflow.org", Version: "v1alpha1", Kind: "TrainJob"}
	runtimes  = schema.GroupVersionKind{Group: "trainer.kubeflow.org", Version: "v1alpha1", Kind: "ClusterTrainingRuntime"}
)

func newCounting() *counting {
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{trainJobs.GroupVersion()})
	m.Add(trainJobs, meta.RESTScopeNamespace)
	m.Add(runtimes, meta.RESTScopeRoot)
	return &counting{DefaultRESTMapper: m}
}

func TestMemoAsksTheDelegateOncePerKindAndVersions(t *testing.T) {
	tests := []struct {
		name      string
		calls     []schema.GroupVersionKind
		wantAsked int
		wantScope []meta.RESTScopeName
	}{
		{"the same kind again", []schema.GroupVersionKind{trainJobs, trainJobs, trainJobs}, 1,
			[]meta.RESTScopeName{meta.RESTScopeNameNamespace, meta.RESTScopeNameNamespace, meta.RESTScopeNameNamespace}},
		{"two kinds, each again", []schema.GroupVersionKind{trainJobs, runtimes, trainJobs, runtimes}, 2,
			[]meta.RESTScopeName{meta.RESTScopeNameNamespace, meta.RESTScopeNameRoot, meta.RESTScopeNameNamespace, meta.RESTScopeNameRoot}},
		{"another version is another question", []schema.GroupVersionKind{trainJobs, {Group: trainJobs.Group, Version: "", Kind: trainJobs.Kind}, trainJobs}, 2,
			[]meta.RESTScopeName{meta.RESTScopeNameNamespace, meta.RESTScopeNameNamespace, meta.RESTScopeNameNamespace}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newCounting()
			m := Memoize(d)
			for i, gvk := range tt.calls {
				var versions []string
				if gvk.Version != "" {
					versions = []string{gvk.Version}
				}
				got, err := m.RESTMapping(gvk.GroupKind(), versions...)
				require.NoError(t, err)
				assert.Equal(t, tt.wantScope[i], got.Scope.Name(), "call %d", i)
				assert.Equal(t, gvk.Kind, got.GroupVersionKind.Kind, "call %d", i)
			}
			assert.Equal(t, tt.wantAsked, d.asked)
		})
	}
}

func TestMemoForgetsMisses(t *testing.T) {
	d := newCounting()
	m := Memoize(d)
	late := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Late"}
	_, err := m.RESTMapping(late.GroupKind(), late.Version)
	require.Error(t, err)
	assert.True(t, meta.IsNoMatchError(err), "the delegate's error, unchanged: %v", err)

	// The CRD is installed; the delegate now knows it and the memo asks again.
	d.Add(late, meta.RESTScopeNamespace)
	got, err := m.RESTMapping(late.GroupKind(), late.Version)
	require.NoError(t, err)
	assert.Equal(t, meta.RESTScopeNameNamespace, got.Scope.Name())
	assert.Equal(t, 2, d.asked)
}

func TestMemoHandsEachCallerItsOwnCopy(t *testing.T) {
	m := Memoize(newCounting())
	first, err := m.RESTMapping(trainJobs.GroupKind(), trainJobs.Version)
	require.NoError(t, err)
	first.Resource.Resource = "changed"
	again, err := m.RESTMapping(trainJobs.GroupKind(), trainJobs.Version)
	require.NoError(t, err)
	assert.Equal(t, "trainjobs", again.Resource.Resource)
}
