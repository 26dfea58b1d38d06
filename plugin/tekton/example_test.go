package tekton

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// The user-facing example passes Tekton's own validation (what its admission webhook runs:
// SetDefaults, then Validate), and its trainstep task's params make a valid step.
func TestExamplePipelineValidates(t *testing.T) {
	b, err := os.ReadFile("../../examples/workflows/tekton-train-pipeline.yaml")
	require.NoError(t, err)
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	kinds := map[string]int{}
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		js, err := sigsyaml.Marshal(doc)
		require.NoError(t, err)
		kind, _ := doc["kind"].(string)
		kinds[kind]++
		switch kind {
		case "Pipeline":
			p := &tektonv1.Pipeline{}
			require.NoError(t, sigsyaml.UnmarshalStrict(js, p))
			p.SetDefaults(t.Context())
			require.Nil(t, p.Validate(t.Context()), "Tekton rejects the example Pipeline")
			checkTrainTasks(t, p.Spec.Tasks)
		case "PipelineRun":
			pr := &tektonv1.PipelineRun{}
			require.NoError(t, sigsyaml.UnmarshalStrict(js, pr))
			pr.SetDefaults(t.Context())
			if pr.Name == "" {
				pr.Name = pr.GenerateName + "x" // the apiserver names it
			}
			require.Nil(t, pr.Validate(t.Context()), "Tekton rejects the example PipelineRun")
		default:
			t.Fatalf("unexpected kind %q in the example", kind)
		}
	}
	assert.Equal(t, map[string]int{"Pipeline": 1, "PipelineRun": 1}, kinds)
}

// checkTrainTasks turns each trainstep task's params into a step, with upstream results and
// pipeline params replaced by sample values as Tekton would substitute them.
func checkTrainTasks(t *testing.T, tasks []tektonv1.PipelineTask) {
	t.Helper()
	found := 0
	for _, pt := range tasks {
		if pt.TaskRef == nil || pt.TaskRef.APIVersion != APIVersion || string(pt.TaskRef.Kind) != Kind {
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
