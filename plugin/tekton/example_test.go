package tekton

import (
	"bytes"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/manifest"
)

const examplePipelineRun = "../../examples/workflows/tekton-train-pipeline.yaml"

// The user-facing example, every document of it as `kubectl create -f` reads them, passes
// Tekton's own validation (what its admission webhook runs: SetDefaults, then Validate), binds
// every workspace its Pipeline declares (Tekton's reconciler refuses a run that does not, which
// Validate does not check), and its trainstep task's params make a valid step. The real-stack
// run of the file is in test/e2e/tekton.
func TestExamplePipelineRunValidates(t *testing.T) {
	b, err := os.ReadFile(examplePipelineRun)
	require.NoError(t, err)
	docs, err := manifest.Documents(examplePipelineRun)
	require.NoError(t, err)
	kinds := map[string]int{}
	for _, d := range docs {
		kind, js := d.Kind, d.JSON
		kinds[kind]++
		require.Equal(t, "PipelineRun", kind, "the example is one PipelineRun with its Pipeline inline, so that it can be created twice")
		pr := &tektonv1.PipelineRun{}
		require.NoError(t, sigsyaml.UnmarshalStrict(js, pr))
		assert.Empty(t, pr.Name, "a fixed name fails the second `kubectl create -f`; use generateName")
		pr.SetDefaults(t.Context())
		pr.Name = pr.GenerateName + "x" // the apiserver names it
		require.Nil(t, pr.Validate(t.Context()), "Tekton rejects the example PipelineRun")
		require.NotNil(t, pr.Spec.PipelineSpec, "the Pipeline is inline")
		checkWorkspacesBound(t, pr)
		checkTrainTasks(t, pr.Spec.PipelineSpec.Tasks)
		checkTrainResultsExist(t, string(b), pr.Spec.PipelineSpec.Tasks)
	}
	assert.Equal(t, map[string]int{"PipelineRun": 1}, kinds)
}

func checkWorkspacesBound(t *testing.T, pr *tektonv1.PipelineRun) {
	t.Helper()
	for _, w := range pr.Spec.PipelineSpec.Workspaces {
		if w.Optional {
			continue
		}
		bound := slices.ContainsFunc(pr.Spec.Workspaces, func(b tektonv1.WorkspaceBinding) bool { return b.Name == w.Name })
		assert.True(t, bound, "the Pipeline needs workspace %q and the PipelineRun binds none: Tekton refuses the run", w.Name)
	}
}

// checkTrainTasks turns each trainstep task's params into a step, with upstream results and
// pipeline params replaced by sample values as Tekton would substitute them.
func checkTrainTasks(t *testing.T, tasks []tektonv1.PipelineTask) {
	t.Helper()
	found := 0
	for _, pt := range tasks {
		if !isTrainStep(pt) {
			continue
		}
		found++
		js, err := sigsyaml.Marshal(map[string]any{"spec": map[string]any{"params": pt.Params}})
		require.NoError(t, err)
		js = bytes.ReplaceAll(js, []byte("$(params.epochs)"), []byte("'200'"))
		js = bytes.ReplaceAll(js, []byte("$(tasks.preprocess.results.dataset-uri)"), []byte("s3://x/y"))
		s, _, err := specFromRun(mustRun(t, string(js)))
		require.NoError(t, err, "task %s", pt.Name)
		assert.Equal(t, "xgboost", s.Framework)
	}
	assert.Equal(t, 1, found, "the example has one trainstep task")
}

func isTrainStep(pt tektonv1.PipelineTask) bool {
	return pt.TaskRef != nil && pt.TaskRef.APIVersion == APIVersion && string(pt.TaskRef.Kind) == Kind
}

var resultRef = regexp.MustCompile(`\$\(tasks\.([a-z0-9-]+)\.results\.([A-Za-z0-9_-]+)\)`)

// checkTrainResultsExist: every result of a trainstep task the file reads exists on every
// cluster. Tekton fails the run when a task's param names a result that was not written, and
// metric-<name> is written only where the Trainer's TrainJobStatus gate is on (off by default);
// result-<key> only when the function returns a dict with that key.
func checkTrainResultsExist(t *testing.T, file string, tasks []tektonv1.PipelineTask) {
	t.Helper()
	funcs := map[string]string{}
	for _, pt := range tasks {
		if !isTrainStep(pt) {
			continue
		}
		for _, p := range pt.Params {
			if p.Name == "trainer.func" {
				funcs[pt.Name] = p.Value.StringVal
			}
		}
	}
	for _, m := range resultRef.FindAllStringSubmatch(file, -1) {
		fn, isTrain := funcs[m[1]]
		if !isTrain {
			continue
		}
		name := m[2]
		switch {
		case slices.Contains(trainjob.OutputNames, name):
		case strings.HasPrefix(name, trainjob.ResultKeyPrefix):
			key := strings.TrimPrefix(name, trainjob.ResultKeyPrefix)
			assert.Contains(t, fn, `"`+key+`":`, "%s reads result %s, but the function of task %s returns no key %q", m[0], name, m[1], key)
		default:
			t.Errorf("%s reads result %s, which not every cluster writes (metric-<name> needs the Trainer's TrainJobStatus gate)", m[0], name)
		}
	}
}
