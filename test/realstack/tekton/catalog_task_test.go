package tekton_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/manifest"
	"github.com/trainstep/trainstep/test/internal/tektonharness"
)

// catalogTaskNamespace is the namespace the catalog-style Task's header installs and runs it in
// (its ClusterRoleBinding names it).
const catalogTaskNamespace = "default"

// catalogTaskServedPods are the pods of the catalog-style Task's runs (generateName train-, pod
// <run>-pod) and of their TrainJobs (named after the step key, the Task's name): they run
// through the suite's pod runner, every other pod of the namespace on kwok.
func catalogTaskServedPods() []string {
	return []string{catalogTaskNamespace + "/train-", catalogTaskNamespace + "/trainstep-train-"}
}

var (
	catalogApply     = regexp.MustCompile(`(?m)^#\s+kubectl apply -n (\S+) -f (examples/workflows/tekton-train-task\.yaml)\s*$`)
	catalogConfigMap = regexp.MustCompile(`(?m)^#\s+kubectl create configmap -n (\S+) (\S+) --from-file=([^=\s]+)=(\S+)\s*$`)
	catalogCreate    = regexp.MustCompile(`(?m)^#\s+kubectl create -n (\S+) -f (examples/workflows/tekton-train-taskrun\.yaml)\s*$`)
)

// TestCatalogTaskExampleRunsAsWritten: examples/workflows/tekton-train-taskrun.yaml's header, as
// written, through Tekton's own controller on the real Trainer stack: `kubectl apply` of every
// document of tekton-train-task.yaml (the Task, its ServiceAccount and rights, server-side),
// `kubectl create configmap` of the step file it names, then `kubectl create -f` of the TaskRun.
// Every pod really runs: the Task's step runs this tree's executor as the trainstep image holds
// it (with Tekton's entrypoint), on the step file from the ConfigMap workspace, as the Task
// file's ServiceAccount; the TrainJob's pods run the function; the Task's results are the
// outputs `executor run --output-dir /tekton/results` wrote.
func TestCatalogTaskExampleRunsAsWritten(t *testing.T) {
	dumpOnFailure(t)
	root := filepath.Join("..", "..", "..")
	run, err := os.ReadFile(filepath.Join(root, "examples", "workflows", "tekton-train-taskrun.yaml"))
	require.NoError(t, err)
	apply, cm, create := catalogApply.FindSubmatch(run), catalogConfigMap.FindSubmatch(run), catalogCreate.FindSubmatch(run)
	require.NotNil(t, apply, "the header installs the Task (kubectl apply -n … -f …)")
	require.NotNil(t, cm, "the header makes the step's ConfigMap (kubectl create configmap …)")
	require.NotNil(t, create, "the header runs it (kubectl create -n … -f …)")
	for _, ns := range [][]byte{apply[1], cm[1], create[1]} {
		require.Equal(t, catalogTaskNamespace, string(ns), "the suite serves the pods of the header's namespace")
	}

	// kubectl apply -n default -f examples/workflows/tekton-train-task.yaml
	objs, err := manifest.Objects(filepath.Join(root, string(apply[2])))
	require.NoError(t, err)
	_, err = manifest.Apply(t.Context(), c, objs, catalogTaskNamespace)
	require.NoError(t, err)
	// kubectl create configmap -n default train-step --from-file=train.yaml=examples/steps/hello-xgboost.yaml
	stepFile, err := os.ReadFile(filepath.Join(root, string(cm[4])))
	require.NoError(t, err)
	require.NoError(t, c.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: catalogTaskNamespace, Name: string(cm[2])},
		Data: map[string]string{string(cm[3]): string(stepFile)}}))
	t.Cleanup(func() {
		_ = c.Delete(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: catalogTaskNamespace, Name: string(cm[2])}})
	})
	// kubectl create -n default -f examples/workflows/tekton-train-taskrun.yaml
	runs, err := manifest.Objects(filepath.Join(root, string(create[2])))
	require.NoError(t, err)
	require.Len(t, runs, 1)
	tr := runs[0]
	tr.SetNamespace(catalogTaskNamespace)
	require.NoError(t, c.Create(t.Context(), tr))

	// Until the TaskRun ends, either way.
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(tr.GroupVersionKind())
	var status, reason, message string
	require.Eventually(t, func() bool {
		require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(tr), got))
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, cd := range conds {
			if m, _ := cd.(map[string]any); m["type"] == "Succeeded" {
				status, _ = m["status"].(string)
				reason, _ = m["reason"].(string)
				message, _ = m["message"].(string)
			}
		}
		return status == "True" || status == "False"
	}, tektonharness.ExampleTimeout, interval, "TaskRun %s did not end (%s %s)", tr.GetName(), reason, message)
	require.Equal(t, "True", status, "TaskRun %s: %s: %s", tr.GetName(), reason, message)
	results := tektonharness.Results(got)

	name := results[trainjob.OutName]
	assert.True(t, strings.HasPrefix(name, "trainstep-train-"), "the TrainJob is named after the step key, the Task's name: %q", name)
	assert.Equal(t, "Succeeded", results[trainjob.OutPhase])
	var returned map[string]any
	require.NoError(t, json.Unmarshal([]byte(results["result"]), &returned), "result: %v", results)
	assert.Equal(t, 0.0, returned["worker"], "what the function returned on rank 0: %v", results)
	assert.Contains(t, returned, "w")
	assert.NotEmpty(t, results["metrics"], "report() reached the Trainer's status server (this suite's gate is on)")

	tj := &trainer.TrainJob{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: catalogTaskNamespace, Name: name}, tj))
	assert.True(t, apimeta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete), "%+v", tj.Status.Conditions)
	require.Len(t, tj.OwnerReferences, 1)
	assert.Equal(t, "Pod", tj.OwnerReferences[0].Kind, "the step pod owns its TrainJob")
	tjPods := &corev1.PodList{}
	require.NoError(t, c.List(t.Context(), tjPods, client.InNamespace(catalogTaskNamespace), client.MatchingLabels{trainjob.LabelJobSetName: name}))
	require.Len(t, tjPods.Items, 2, "two training nodes")
	for _, p := range tjPods.Items {
		require.True(t, stack.Serves(&p), "pod %s runs through the pod runner", p.Name)
		assert.Equal(t, corev1.PodSucceeded, p.Status.Phase, "pod %s", p.Name)
	}
}
