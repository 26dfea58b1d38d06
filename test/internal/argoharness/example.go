package argoharness

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
	"github.com/trainstep/trainstep/test/internal/realstack"
)

// ExampleTimeout bounds an example's run: three steps whose pods really run (argoexec, python)
// beside the stack on a shared 2-core machine.
const ExampleTimeout = 10 * time.Minute

// The example's header: the command that runs it.
var argoSubmit = regexp.MustCompile(`(?m)^#\s+argo submit -n (\S+) --watch (examples/workflows/argo-train-dag\.yaml)\s*$`)

// DAGExampleServedPods are the pods of the Argo example's workflows (generateName train-dag-)
// and of their TrainJobs: trainstep names a TrainJob after its step key, "{{node.name}}" there
// (train-dag-x7k2p.train), whose first segment goes to fit step.MaxNamePrefix
// (dag-x7k2p-train-…). A suite that runs the example serves them (realstack.Options.ServedPods)
// through its pod runner; every other pod runs on kwok.
func DAGExampleServedPods() []string {
	return []string{Namespace + "/train-dag-", Namespace + "/dag-"}
}

// RunDAGExample: examples/workflows/argo-train-dag.yaml, byte for byte, does what its header
// says, `argo submit -n ml --watch` (the harness's workflow-controller manages the ml
// namespace, Namespace, which is the header's -n), through Argo's own workflow-controller and
// agent, the real plugin binary and the real Trainer stack, on a cluster whose only storage is
// ReadWriteOnce hostPath volumes. Every pod really runs (the pod runner plays their kubelet):
// preprocess writes the dataset to the workflow's claim and its row count as an output; the
// TrainJob's two xgboost-runtime pods run the training function with that row count, rank 0's
// return value comes back as the train step's outputs; evaluate prints them. The function's
// numbers are checked against the same computation done here, so they can only have come from
// the function run on rows=100. statusServer says whether the stack's Trainer runs with its
// TrainJobStatus gate on: metric-loss is then the last loss reported, else empty.
func RunDAGExample(t *testing.T, h *Harness, stack *realstack.Stack, statusServer bool) {
	b, err := os.ReadFile(filepath.Join(exampleRoot(t), "examples", "workflows", "argo-train-dag.yaml"))
	require.NoError(t, err)
	m := argoSubmit.FindSubmatch(b)
	require.NotNil(t, m, "the example's header must say how to run it (argo submit -n … --watch …)")
	require.Equal(t, Namespace, string(m[1]), "the header's namespace is the one the harness's controller manages")

	// `argo submit` creates the Workflow in the namespace; its generateName picks the name.
	wf := &wfv1.Workflow{}
	require.NoError(t, yaml.UnmarshalStrict(b, wf), "the example is one Workflow")
	require.Equal(t, Namespace+"/"+wf.GenerateName, DAGExampleServedPods()[0],
		"the suite serves the pods of the example's workflows (generateName %s)", wf.GenerateName)
	wf = h.Submit(t, string(b))
	h.RunAgent(t, wf.Name, ExampleTimeout)
	got := h.WaitPhase(t, wf.Name, ExampleTimeout)
	require.Equal(t, wfv1.WorkflowSucceeded, got.Status.Phase, "%s\n%s", got.Status.Message, Nodes(got))

	// preprocess wrote rows=100, which train received.
	train := NodeOf(got, "train")
	require.NotNil(t, train, Nodes(got))
	assert.Equal(t, wfv1.NodeSucceeded, train.Phase)
	require.NotNil(t, train.Inputs)
	assert.Equal(t, "100", ParamOf(train.Inputs.Parameters, "rows"), "preprocess's output is train's input")

	// The outputs are what the function returned on rank 0 (DMLC_TASK_ID=0 of 2 workers).
	name := Output(train, trainjob.OutName)
	require.NotEmpty(t, name, "outputs: %+v", train.Outputs)
	wantW, wantB, wantLoss := exampleTrain(0, 2, 100, 200)
	gotW, err := strconv.ParseFloat(Output(train, "result-w"), 64)
	require.NoError(t, err, "result-w: %+v", train.Outputs)
	assert.InDelta(t, wantW, gotW, 0.0015, "result-w is rank 0's w")
	gotLoss, err := strconv.ParseFloat(Output(train, "result-loss"), 64)
	require.NoError(t, err, "result-loss: %+v", train.Outputs)
	assert.InDelta(t, wantLoss, gotLoss, 0.00015, "result-loss is rank 0's loss")
	var result map[string]float64
	require.NoError(t, json.Unmarshal([]byte(Output(train, "result")), &result), "result: %+v", train.Outputs)
	assert.InDelta(t, wantB, result["b"], 0.0015, "result is the returned dict")
	if statusServer {
		// report() reached the Trainer's status server, and metric-loss is the last loss
		// reported, the one returned.
		assert.Equal(t, Output(train, "result-loss"), Output(train, "metric-loss"), "metric-loss is the last report(loss=…)")
	} else {
		// The gate off (the Trainer's default): no status server, metric-loss declared with
		// valueFrom.supplied is there, empty, and nothing that reads it fails.
		assert.Empty(t, Output(train, "metric-loss"), "no status server, no metric")
	}

	// The real Trainer completed the TrainJob from its pods, which ran the function.
	tj := &trainer.TrainJob{}
	require.NoError(t, stack.Client.Get(t.Context(), client.ObjectKey{Namespace: Namespace, Name: name}, tj))
	assert.True(t, apimeta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete), "%+v", tj.Status.Conditions)
	pods := &corev1.PodList{}
	require.NoError(t, stack.Client.List(t.Context(), pods, client.InNamespace(Namespace),
		client.MatchingLabels{trainjob.LabelJobSetName: name}))
	require.Len(t, pods.Items, 2, "two training nodes")
	// Both on one Node, where the ReadWriteOnce claim is attached (the step's pod.affinity).
	assert.NotEmpty(t, pods.Items[0].Spec.NodeName)
	assert.Equal(t, pods.Items[0].Spec.NodeName, pods.Items[1].Spec.NodeName, "the TrainJob's pods share the claim's node")
	logs := ""
	for _, p := range pods.Items {
		require.True(t, stack.Serves(&p), "pod %s runs through the pod runner", p.Name)
		assert.Equal(t, corev1.PodSucceeded, p.Status.Phase, "pod %s", p.Name)
		logs += h.Pods.Log(p.Namespace, p.Name, "node")
	}
	for rank := range 2 {
		w, b, _ := exampleTrain(rank, 2, 100, 200)
		assert.Contains(t, logs, fmt.Sprintf("worker %d done: w=%.3f b=%.3f", rank, w, b), "worker %d ran the function", rank)
	}

	// evaluate got the train step's outputs and printed them.
	evaluate := PodOfStep(t, stack.Client, wf.Name, "evaluate")
	log := h.Pods.Log(evaluate.Namespace, evaluate.Name, "main")
	assert.Contains(t, log, fmt.Sprintf("TrainJob %s took ", name), "evaluate's log:\n%s", log)
	assert.Contains(t, log, fmt.Sprintf("learnt w=%s with loss %s", Output(train, "result-w"), Output(train, "result-loss")),
		"evaluate's log:\n%s", log)

	// The workflow's claim (Argo deleted it with the workflow) was bound to a ReadWriteOnce
	// volume, which holds what preprocess wrote.
	pv, err := stack.ClaimVolume(t.Context(), Namespace, wf.Name+"-data")
	require.NoError(t, err)
	assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, pv.Spec.AccessModes)
	data, err := os.ReadFile(filepath.Join(pv.Spec.HostPath.Path, "train.csv"))
	require.NoError(t, err, "preprocess wrote /data/train.csv")
	assert.Equal(t, "x,y\n1,2\n", string(data))
}

// exampleRoot is the trainstep module's root (repoRoot), where examples/ is.
func exampleRoot(t *testing.T) string {
	root, err := repoRoot(t.Context())
	require.NoError(t, err)
	return root
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

// NodeOf is the workflow's node of that display name, nil when there is none.
func NodeOf(wf *wfv1.Workflow, displayName string) *wfv1.NodeStatus {
	for _, n := range wf.Status.Nodes {
		if n.DisplayName == displayName {
			return &n
		}
	}
	return nil
}

// ParamOf is the value of parameter name, "" when it has none.
func ParamOf(ps []wfv1.Parameter, name string) string {
	for _, p := range ps {
		if p.Name == name && p.Value != nil {
			return p.Value.String()
		}
	}
	return ""
}

// PodOfStep is the pod of workflow wfName's node displayName (Argo's node-name annotation:
// wfName.displayName in a DAG, wfName[i].displayName in a steps template).
func PodOfStep(t *testing.T, c client.Reader, wfName, displayName string) *corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	require.NoError(t, c.List(t.Context(), pods, client.InNamespace(Namespace),
		client.MatchingLabels{"workflows.argoproj.io/workflow": wfName}))
	for i, p := range pods.Items {
		if strings.HasSuffix(p.Annotations["workflows.argoproj.io/node-name"], "."+displayName) {
			return &pods.Items[i]
		}
	}
	require.Failf(t, "no pod", "workflow %s has no pod of node %s", wfName, displayName)
	return nil
}
