package argo_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/argoharness"
)

// exampleTimeout bounds the example's run: three steps whose pods really run (argoexec, python)
// beside the stack on a shared 2-core machine.
const exampleTimeout = 10 * time.Minute

// The example's header: the command that runs it.
var argoSubmit = regexp.MustCompile(`(?m)^#\s+argo submit -n (\S+) --watch (examples/workflows/argo-train-dag\.yaml)\s*$`)

// TestArgoExampleRunsAsWritten: examples/workflows/argo-train-dag.yaml, byte for byte, does what
// its header says, `argo submit -n argo --watch` (the harness's workflow-controller manages the
// argo namespace, argoharness.Namespace, which is the header's -n), through Argo's own
// workflow-controller and agent, the real plugin binary and the real Trainer stack, on a cluster
// whose only storage is ReadWriteOnce hostPath volumes. Every pod really runs (the pod runner
// plays their kubelet): preprocess writes the dataset to the workflow's claim and its row count
// as an output; the TrainJob's two xgboost-runtime pods run the training function with that row
// count, rank 0's return value comes back as the train step's outputs; evaluate prints them. The
// function's numbers are checked against the same computation done here, so they can only have
// come from the function run on rows=100.
func TestArgoExampleRunsAsWritten(t *testing.T) {
	dumpPodsOnFailure(t)
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "workflows", "argo-train-dag.yaml"))
	require.NoError(t, err)
	m := argoSubmit.FindSubmatch(b)
	require.NotNil(t, m, "the example's header must say how to run it (argo submit -n … --watch …)")
	require.Equal(t, argoharness.Namespace, string(m[1]), "the header's namespace is the one the harness's controller manages")

	// `argo submit` creates the Workflow in the namespace; its generateName picks the name.
	wf := &wfv1.Workflow{}
	require.NoError(t, yaml.UnmarshalStrict(b, wf), "the example is one Workflow")
	require.Equal(t, argoharness.Namespace+"/"+wf.GenerateName, exampleServedPods()[0],
		"the suite serves the pods of the example's workflows (generateName %s)", wf.GenerateName)
	wf = harness.Submit(t, string(b))
	harness.RunAgent(t, wf.Name, exampleTimeout)
	got := harness.WaitPhase(t, wf.Name, exampleTimeout)
	require.Equal(t, wfv1.WorkflowSucceeded, got.Status.Phase, "%s\n%s", got.Status.Message, argoharness.Nodes(got))

	// preprocess wrote rows=100, which train received.
	train := nodeOf(got, "train")
	require.NotNil(t, train, argoharness.Nodes(got))
	assert.Equal(t, wfv1.NodeSucceeded, train.Phase)
	require.NotNil(t, train.Inputs)
	assert.Equal(t, "100", paramOf(train.Inputs.Parameters, "rows"), "preprocess's output is train's input")

	// The outputs are what the function returned on rank 0 (DMLC_TASK_ID=0 of 2 workers).
	name := argoharness.Output(train, trainjob.OutName)
	require.NotEmpty(t, name, "outputs: %+v", train.Outputs)
	wantW, wantB, wantLoss := exampleTrain(0, 2, 100, 200)
	gotW, err := strconv.ParseFloat(argoharness.Output(train, "result-w"), 64)
	require.NoError(t, err, "result-w: %+v", train.Outputs)
	assert.InDelta(t, wantW, gotW, 0.0015, "result-w is rank 0's w")
	gotLoss, err := strconv.ParseFloat(argoharness.Output(train, "result-loss"), 64)
	require.NoError(t, err, "result-loss: %+v", train.Outputs)
	assert.InDelta(t, wantLoss, gotLoss, 0.00015, "result-loss is rank 0's loss")
	var result map[string]float64
	require.NoError(t, json.Unmarshal([]byte(argoharness.Output(train, "result")), &result), "result: %+v", train.Outputs)
	assert.InDelta(t, wantB, result["b"], 0.0015, "result is the returned dict")
	// TrainJobStatus is on in this suite: report() reached the Trainer's status server, and
	// metric-loss is the last loss reported, the one returned.
	assert.Equal(t, argoharness.Output(train, "result-loss"), argoharness.Output(train, "metric-loss"), "metric-loss is the last report(loss=…)")

	// The real Trainer completed the TrainJob from its pods, which ran the function.
	tj := &trainer.TrainJob{}
	require.NoError(t, stack.Client.Get(t.Context(), client.ObjectKey{Namespace: argoharness.Namespace, Name: name}, tj))
	assert.True(t, apimeta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete), "%+v", tj.Status.Conditions)
	pods := &corev1.PodList{}
	require.NoError(t, stack.Client.List(t.Context(), pods, client.InNamespace(argoharness.Namespace),
		client.MatchingLabels{trainjob.LabelJobSetName: name}))
	require.Len(t, pods.Items, 2, "two training nodes")
	logs := ""
	for _, p := range pods.Items {
		require.True(t, stack.Serves(&p), "pod %s runs through the pod runner", p.Name)
		assert.Equal(t, corev1.PodSucceeded, p.Status.Phase, "pod %s", p.Name)
		logs += harness.Pods.Log(p.Namespace, p.Name, "node")
	}
	for rank := range 2 {
		w, b, _ := exampleTrain(rank, 2, 100, 200)
		assert.Contains(t, logs, fmt.Sprintf("worker %d done: w=%.3f b=%.3f", rank, w, b), "worker %d ran the function", rank)
	}

	// evaluate got the train step's outputs and printed them.
	evaluate := podOfNode(t, wf.Name, "evaluate")
	log := harness.Pods.Log(evaluate.Namespace, evaluate.Name, "main")
	assert.Contains(t, log, fmt.Sprintf("TrainJob %s took ", name), "evaluate's log:\n%s", log)
	assert.Contains(t, log, fmt.Sprintf("learnt w=%s with loss %s", argoharness.Output(train, "result-w"), argoharness.Output(train, "result-loss")),
		"evaluate's log:\n%s", log)

	// The workflow's claim (Argo deleted it with the workflow) was bound to a ReadWriteOnce
	// volume, which holds what preprocess wrote.
	pv, err := stack.ClaimVolume(t.Context(), argoharness.Namespace, wf.Name+"-data")
	require.NoError(t, err)
	assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, pv.Spec.AccessModes)
	data, err := os.ReadFile(filepath.Join(pv.Spec.HostPath.Path, "train.csv"))
	require.NoError(t, err, "preprocess wrote /data/train.csv")
	assert.Equal(t, "x,y\n1,2\n", string(data))
}

// exampleTrain is the example's training function, in Go: w, b and loss of worker rank.
func exampleTrain(rank, workers, rows, epochs int) (w, b, loss float64) {
	var xs, ys []float64
	for x := rank; x < rows; x += workers {
		xs = append(xs, float64(x)/10)
		ys = append(ys, 3.0*(float64(x)/10)+0.5)
	}
	n := float64(len(xs))
	for range epochs {
		var gw, gb float64
		for i, x := range xs {
			gw += (w*x + b - ys[i]) * x
		}
		for i, x := range xs {
			gb += w*x + b - ys[i]
		}
		gw, gb = gw/n, gb/n
		w, b = w-0.05*gw, b-0.05*gb
		loss = 0
		for i, x := range xs {
			loss += (w*x + b - ys[i]) * (w*x + b - ys[i])
		}
		loss /= n
	}
	return w, b, loss
}

func nodeOf(wf *wfv1.Workflow, displayName string) *wfv1.NodeStatus {
	for _, n := range wf.Status.Nodes {
		if n.DisplayName == displayName {
			return &n
		}
	}
	return nil
}

func paramOf(ps []wfv1.Parameter, name string) string {
	for _, p := range ps {
		if p.Name == name && p.Value != nil {
			return p.Value.String()
		}
	}
	return ""
}

// podOfNode is the pod of workflow wfName's node displayName (Argo's node-name annotation).
func podOfNode(t *testing.T, wfName, displayName string) *corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	require.NoError(t, stack.Client.List(t.Context(), pods, client.InNamespace(argoharness.Namespace),
		client.MatchingLabels{"workflows.argoproj.io/workflow": wfName}))
	for i, p := range pods.Items {
		if p.Annotations["workflows.argoproj.io/node-name"] == wfName+"."+displayName {
			return &pods.Items[i]
		}
	}
	require.Failf(t, "no pod", "workflow %s has no pod of node %s", wfName, displayName)
	return nil
}

// dumpPodsOnFailure shows the end of every process's output (the workflow-controller, the
// plugin, the agent, each served pod's containers) when the test failed.
func dumpPodsOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			var b strings.Builder
			harness.DumpLogs(&b)
			if err := served.Err(); err != nil {
				fmt.Fprintf(&b, "running the served pods: %v\n", err)
			}
			t.Log(b.String())
		}
	})
}
