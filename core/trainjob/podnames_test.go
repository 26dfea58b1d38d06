package trainjob

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/runtimes/stock"
)

// Every stock runtime leaves room for the longest TrainJob name trainstep makes, even with
// thousands of nodes: the pod names JobSet would generate are valid DNS-1035 labels.
func TestStockRuntimesLeaveRoomForEveryName(t *testing.T) {
	catalog, err := stock.Source{}.List(t.Context(), "")
	require.NoError(t, err)
	require.NotEmpty(t, catalog.Runtimes)
	name := Identity{Engine: "argo", OwnerUID: "u", StepKey: strings.Repeat("x", 40)}.Name()
	require.Len(t, name, MaxNameLength)
	sawInitializer := false
	for _, rt := range catalog.Runtimes {
		require.NotEmpty(t, rt.ReplicatedJobs, rt.Name)
		for _, nodes := range []int32{1, 2, 10000} {
			assert.Empty(t, checkPodNames(&rt, nodes), "%s with %d nodes", rt.Name, nodes)
			for _, rj := range rt.ReplicatedJobs {
				sawInitializer = sawInitializer || rj.Ancestor == runtimes.AncestorDataset
				pod := longestPodName(name, rj, nodes)
				assert.Empty(t, validation.IsDNS1035Label(pod), "%s: %s", rt.Name, pod)
			}
		}
	}
	assert.True(t, sawInitializer, "the stock runtimes include one with a dataset-initializer")
}

// The case the Trainer's Event reported: a TorchTune step keyed by an Argo node name.
func TestInitializerPodNameOfAnArgoStep(t *testing.T) {
	name := Identity{Engine: "argo", OwnerUID: "u", StepKey: "train-dag-x7k2p.train"}.Name()
	pod := longestPodName(name, runtimes.ReplicatedJob{Name: "dataset-initializer", Ancestor: runtimes.AncestorDataset, Replicas: 1, Completions: 1}, 1)
	assert.LessOrEqual(t, len(pod), 63, pod)
}

func TestCheckPodNamesRefusesALongReplicatedJob(t *testing.T) {
	rt := &runtimes.Runtime{Name: "custom", ReplicatedJobs: []runtimes.ReplicatedJob{
		{Name: "node", Ancestor: runtimes.AncestorTrainer, Replicas: 1, Completions: 1},
		{Name: "a-very-long-replicated-job-name", Replicas: 1, Completions: 1},
	}}
	errs := checkPodNames(rt, 4)
	require.Len(t, errs, 1)
	assert.Equal(t, "runtime.name", errs[0].Field)
	assert.Contains(t, errs[0].Detail, `"a-very-long-replicated-job-name"`)
	assert.Contains(t, errs[0].Detail, "at most 19 characters")
	assert.Empty(t, checkPodNames(&runtimes.Runtime{Name: "ok", ReplicatedJobs: rt.ReplicatedJobs[:1]}, 100000))
}
