package tektonharness

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
)

// Ref is a PipelineTask's taskRef naming trainstep's custom task.
const Ref = "{apiVersion: " + tekton.APIVersion + ", kind: " + tekton.Kind + "}"

// Poll is the interval of the waits below.
const Poll = 100 * time.Millisecond

// CreatePipelineRun creates a tekton.dev/v1 PipelineRun (the storage version: no conversion
// webhook is needed) from YAML in ns.
func CreatePipelineRun(t *testing.T, c client.Client, ns, y string) *unstructured.Unstructured {
	t.Helper()
	pr := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(y), &pr.Object))
	pr.SetNamespace(ns)
	require.NoError(t, c.Create(t.Context(), pr))
	return pr
}

// GetPipelineRun reads PipelineRun ns/name; a failure to read fails ct.
func GetPipelineRun(ct require.TestingT, t *testing.T, c client.Client, ns, name string) *unstructured.Unstructured {
	pr := &unstructured.Unstructured{}
	pr.SetAPIVersion("tekton.dev/v1")
	pr.SetKind("PipelineRun")
	require.NoError(ct, c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, pr))
	return pr
}

// SucceededCondition returns the status, reason and message of the PipelineRun's Succeeded
// condition.
func SucceededCondition(pr *unstructured.Unstructured) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(pr.Object, "status", "conditions")
	for _, ci := range conds {
		cm, _ := ci.(map[string]any)
		if cm["type"] == "Succeeded" {
			s, _ := cm["status"].(string)
			r, _ := cm["reason"].(string)
			m, _ := cm["message"].(string)
			return s, r, m
		}
	}
	return "", "", ""
}

// WaitPipelineRun waits until the PipelineRun's Succeeded condition has wantStatus and
// wantReason, and returns it.
func WaitPipelineRun(t *testing.T, c client.Client, ns, name, wantStatus, wantReason string, timeout time.Duration) *unstructured.Unstructured {
	t.Helper()
	var pr *unstructured.Unstructured
	ok := assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		pr = GetPipelineRun(ct, t, c, ns, name)
		s, r, _ := SucceededCondition(pr)
		assert.Equal(ct, wantStatus, s)
		assert.Equal(ct, wantReason, r)
	}, timeout, Poll)
	if !ok {
		var status []byte
		if pr != nil {
			status, _ = yaml.Marshal(pr.Object["status"])
		}
		t.Fatalf("PipelineRun %s/%s never reached %s/%s; status:\n%s", ns, name, wantStatus, wantReason, status)
	}
	return pr
}

// CustomRuns lists the CustomRuns of namespace ns; a failure to list fails ct.
func CustomRuns(ct require.TestingT, t *testing.T, c client.Client, ns string) []v1beta1.CustomRun {
	runs := &v1beta1.CustomRunList{}
	require.NoError(ct, c.List(t.Context(), runs, client.InNamespace(ns)))
	return runs.Items
}

// CreateStepPipelineRun creates PipelineRun name in ns: one trainstep task "train" whose whole
// step is the step param (YAML), its trainjob-name, phase and num-nodes results those of the
// Pipeline.
func CreateStepPipelineRun(t *testing.T, c client.Client, ns, name, step string) *unstructured.Unstructured {
	t.Helper()
	return CreateRetriedStepPipelineRun(t, c, ns, name, step, 0)
}

// CreateRetriedStepPipelineRun is CreateStepPipelineRun whose task has Tekton's retries.
func CreateRetriedStepPipelineRun(t *testing.T, c client.Client, ns, name, step string, retries int) *unstructured.Unstructured {
	t.Helper()
	indented := "          " + strings.ReplaceAll(strings.TrimSpace(step), "\n", "\n          ")
	return CreatePipelineRun(t, c, ns, `
apiVersion: tekton.dev/v1
kind: PipelineRun
metadata: {name: `+name+`}
spec:
  pipelineSpec:
    tasks:
    - name: train
      taskRef: `+Ref+`
      retries: `+strconv.Itoa(retries)+`
      params:
      - name: step
        value: |
`+indented+`
    results:
    - {name: trainjob-name, value: $(tasks.train.results.trainjob-name)}
    - {name: phase, value: $(tasks.train.results.phase)}
    - {name: num-nodes, value: $(tasks.train.results.num-nodes)}
`)
}
