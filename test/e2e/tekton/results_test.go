package tekton_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The Pipeline's results take result-k40 of a 40-key result and result-model_uri next to a NaN
// loss from a trainstep CustomRun, through Tekton's own controller: a CustomRun is not told
// which results its task declares, so every key of the value is a result.
func TestEveryResultKeyIsACustomRunResult(t *testing.T) {
	t.Parallel()
	dumpOnFailure(t)
	ns := env.Namespace(t)
	pipelineRun(t, ns, `
apiVersion: tekton.dev/v1
kind: PipelineRun
metadata: {name: keys}
spec:
  pipelineSpec:
    tasks:
    - name: train
      taskRef: `+ref+`
      params:
      - {name: framework, value: xgboost}
      - name: trainer.func
        value: |
          def train():
              out = {"k%02d" % i: i for i in range(1, 41)}
              out.update(model_uri="s3://bucket/model", loss=float("nan"))
              return out
    results:
    - {name: k40, value: $(tasks.train.results.result-k40)}
    - {name: model-uri, value: $(tasks.train.results.result-model_uri)}
    - {name: loss, value: $(tasks.train.results.result-loss)}
`)
	pr := waitPR(t, ns, "keys", "True", "Succeeded")
	prResults, _, _ := unstructured.NestedSlice(pr.Object, "status", "results")
	got := map[string]string{}
	for _, r := range prResults {
		m, _ := r.(map[string]any)
		got[m["name"].(string)], _ = m["value"].(string)
	}
	assert.Equal(t, map[string]string{"k40": "40", "model-uri": "s3://bucket/model", "loss": "NaN"}, got)
}
