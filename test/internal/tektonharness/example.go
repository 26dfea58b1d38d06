package tektonharness

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/manifest"
	"github.com/trainstep/trainstep/test/internal/podrunner"
	"github.com/trainstep/trainstep/test/internal/realstack"
)

// ExampleTimeout bounds the example's run: three tasks whose pods really run (Tekton's
// entrypoint, python) beside the stack on a shared 2-core machine.
const ExampleTimeout = 10 * time.Minute

var kubectlCreate = regexp.MustCompile(`(?m)^#\s+kubectl create -f (examples/workflows/tekton-train-pipeline\.yaml)\s*$`)

// RunExample proves that examples/workflows/tekton-train-pipeline.yaml, byte for byte,
// does what its header says, `kubectl create -f` (every document, in the namespace of the
// context: a served namespace here), through Tekton's own controller, trainstep's and the real
// Trainer stack, on a cluster whose only storage is ReadWriteOnce hostPath volumes. Every pod
// really runs (the pod runner plays their kubelet, with Tekton's own entrypoint in the TaskRun
// pods): preprocess writes the dataset to the workspace's claim and its path as a result; the
// TrainJob's two xgboost-runtime pods run the training function with it and the run's epochs
// (300, the PipelineRun's param over the Pipeline's default 200); rank 0's return value comes back
// as the custom task's results; evaluate reads $(tasks.train.results.result-loss), which exists
// only because the function returned it, and prints it. Where the stack's Trainer runs its
// TrainJobStatus gate the function's report() reached its status server: the train task's
// metric-loss result is the last loss reported; where it does not, there is no such result and
// the example runs all the same, as its header says. Tekton's controller and trainstep's run on
// stack; pods serves its namespaces (realstack.Stack.ServePods) with PodImages.
func RunExample(t *testing.T, c client.Client, stack *realstack.Stack, pods *podrunner.Runner) {
	t.Helper()
	root, err := exec.CommandContext(t.Context(), "go", "list", "-m", "-f", "{{.Dir}}").Output()
	require.NoError(t, err, "locating the trainstep module")
	b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(root)), "examples", "workflows", "tekton-train-pipeline.yaml"))
	require.NoError(t, err)
	require.True(t, kubectlCreate.Match(b), "the example's header must say how to run it (kubectl create -f …)")
	ns := stack.ServedNamespace(t)

	objs, err := manifest.Objects(filepath.Join(strings.TrimSpace(string(root)), "examples", "workflows", "tekton-train-pipeline.yaml"))
	require.NoError(t, err)
	var name string
	for _, u := range objs {
		u.SetNamespace(ns)
		require.NoError(t, c.Create(t.Context(), u), "creating %s %s%s", u.GetKind(), u.GetName(), u.GetGenerateName())
		if u.GetKind() == "PipelineRun" {
			name = u.GetName()
		}
	}
	require.NotEmpty(t, name, "the example creates a PipelineRun")
	pr := WaitPipelineRun(t, c, ns, name, "True", "Succeeded", ExampleTimeout)

	// The Pipeline's results are the train task's: the function's return value on rank 0.
	results := Results(pr)
	const epochs = 300 // the PipelineRun's param
	wantLoss := fmt.Sprint(roundTo(1.0/epochs, 4))
	tj := results["trainjob"]
	require.NotEmpty(t, tj, "results: %v", results)
	assert.Equal(t, "/workspace/data/train.model", results["model-uri"], "the function's model_uri, from preprocess's dataset-uri")
	assert.Equal(t, wantLoss, results["final-loss"], "the function's loss after %d epochs", epochs)
	assert.NotEmpty(t, results["training-seconds"])
	runs := CustomRuns(t, t, c, ns)
	require.Len(t, runs, 1, "the train task's CustomRun")
	metric, reported := "", false
	for _, r := range runs[0].Status.Results {
		if r.Name == "metric-loss" {
			metric, reported = r.Value, true
		}
	}
	if stack.TrainJobStatus() {
		assert.Equal(t, wantLoss, metric, "metric-loss is the last report(loss=…), through the Trainer's status server")
	} else {
		assert.False(t, reported, "no metric-loss where the Trainer's TrainJobStatus gate is off: %+v", runs[0].Status.Results)
	}

	// The real Trainer completed the TrainJob from its pods, which ran the function.
	job := &trainer.TrainJob{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: tj}, job))
	assert.True(t, apimeta.IsStatusConditionTrue(job.Status.Conditions, trainer.TrainJobComplete), "%+v", job.Status.Conditions)
	jobPods := &corev1.PodList{}
	require.NoError(t, c.List(t.Context(), jobPods, client.InNamespace(ns), client.MatchingLabels{trainjob.LabelJobSetName: tj}))
	require.Len(t, jobPods.Items, 2, "two training nodes")
	logs := ""
	for _, p := range jobPods.Items {
		assert.Equal(t, corev1.PodSucceeded, p.Status.Phase, "pod %s", p.Name)
		logs += pods.Log(p.Namespace, p.Name, "node")
	}
	for rank := range 2 {
		assert.Contains(t, logs, fmt.Sprintf("worker %d/2 training on /workspace/data/train.csv for %d epochs", rank, epochs))
	}

	// evaluate's params carry the results, and its step printed them.
	evaluate := taskRunPod(t, c, ns, name, "evaluate")
	log := pods.Log(ns, evaluate.Name, "step-evaluate")
	assert.Contains(t, log, fmt.Sprintf("evaluating the model of TrainJob %s final loss %s", tj, wantLoss), "evaluate's log:\n%s", log)
	var env []string
	for _, e := range evaluate.Spec.Containers[0].Env {
		env = append(env, e.Name+"="+e.Value)
	}
	assert.Contains(t, env, "LOSS="+wantLoss)
	assert.Contains(t, env, "TRAINJOB="+tj)
	var metrics map[string]any
	for _, e := range evaluate.Spec.Containers[0].Env {
		if e.Name == "METRICS" {
			assert.NoError(t, json.Unmarshal([]byte(e.Value), &metrics), "METRICS is JSON: %s", e.Value)
		}
	}
	assert.NotNil(t, metrics, "evaluate's METRICS: %v", env)

	// preprocess wrote the dataset to the claim Tekton made for the run from the workspace's
	// volumeClaimTemplate, bound to a ReadWriteOnce volume.
	pv, err := stack.ClaimVolume(t.Context(), ns, "")
	require.NoError(t, err)
	assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, pv.Spec.AccessModes)
	data, err := os.ReadFile(filepath.Join(pv.Spec.HostPath.Path, "train.csv"))
	require.NoError(t, err, "preprocess wrote the dataset to the workspace")
	assert.Equal(t, "x,y\n1,2\n2,4\n", string(data))
}

// Results are the results of a TaskRun or PipelineRun (status.results), by name.
func Results(run *unstructured.Unstructured) map[string]string {
	results := map[string]string{}
	rs, _, _ := unstructured.NestedSlice(run.Object, "status", "results")
	for _, r := range rs {
		m, _ := r.(map[string]any)
		n, _ := m["name"].(string)
		v, _ := m["value"].(string)
		results[n] = v
	}
	return results
}

// roundTo is Python's round(v, digits) for the values here.
func roundTo(v float64, digits int) float64 {
	var p float64 = 1
	for range digits {
		p *= 10
	}
	return float64(int64(v*p+0.5)) / p
}

// taskRunPod is the pod of PipelineRun pr's task (Tekton's labels).
func taskRunPod(t *testing.T, c client.Client, ns, pr, task string) *corev1.Pod {
	t.Helper()
	l := &corev1.PodList{}
	require.NoError(t, c.List(t.Context(), l, client.InNamespace(ns),
		client.MatchingLabels{"tekton.dev/pipelineRun": pr, "tekton.dev/pipelineTask": task}))
	require.Len(t, l.Items, 1, "the pod of task %s: %v", task, podNames(l.Items))
	return &l.Items[0]
}

func podNames(ps []corev1.Pod) string {
	names := make([]string, 0, len(ps))
	for _, p := range ps {
		names = append(names, p.Name)
	}
	return strings.Join(names, ", ")
}
