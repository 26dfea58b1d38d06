package argo_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/argoharness"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// e2eTimeout bounds one workflow: the controller requeues every second here, the agent patches
// every second, and the xgboost step runs real Python on a busy 2-core machine.
const e2eTimeout = 3 * time.Minute

// recorder is the HTTP endpoint the workflow's HTTP templates call: preprocess GETs, evaluate
// POSTs the train step's outputs.
type recorder struct {
	mu     sync.Mutex
	posted []string
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method == http.MethodPost {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.posted = append(r.posted, string(b))
		r.mu.Unlock()
	}
	fmt.Fprint(w, "60")
}

func (r *recorder) bodies() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.posted...)
}

// dagWorkflow is the example DAG with its container steps replaced by HTTP templates, the only
// templates besides plugins that run with no pod.
func dagWorkflow(url string) string {
	return fmt.Sprintf(`
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: train-dag-}
spec:
  entrypoint: main
  serviceAccountName: trainstep-workflow
  templates:
    - name: main
      dag:
        tasks:
          - {name: preprocess, template: preprocess}
          - name: train
            template: train
            dependencies: [preprocess]
            arguments: {parameters: [{name: rows, value: "{{tasks.preprocess.outputs.result}}"}]}
          - name: evaluate
            template: evaluate
            dependencies: [train]
            arguments:
              parameters:
                - {name: trainjob, value: "{{tasks.train.outputs.parameters.trainjob-name}}"}
                - {name: phase, value: "{{tasks.train.outputs.parameters.phase}}"}
                - {name: nodes, value: "{{tasks.train.outputs.parameters.num-nodes}}"}
    - name: preprocess
      http: {url: "%[1]s/rows"}
    - name: train
      inputs: {parameters: [{name: rows}]}
      retryStrategy: {limit: "1"}
      outputs:
        parameters:
          - {name: trainjob-name, valueFrom: {supplied: {}}}
          - {name: phase, valueFrom: {supplied: {}}}
          - {name: num-nodes, valueFrom: {supplied: {}}}
      plugin:
        trainstep:
          key: "{{node.name}}"
          attempt: "{{retries}}"
          framework: xgboost
          trainer:
            numNodes: 2
            funcArgs: {rows: "{{inputs.parameters.rows}}"}
            func: |
              def train(rows):
                  import os
                  rank, workers = int(os.environ["DMLC_TASK_ID"]), int(os.environ["DMLC_NUM_WORKER"])
                  print(f"worker {rank}/{workers} trained on {len(range(rank, int(rows), workers))} rows")
    - name: evaluate
      inputs: {parameters: [{name: trainjob}, {name: phase}, {name: nodes}]}
      http:
        url: "%[1]s/evaluate"
        method: POST
        body: "trainjob={{inputs.parameters.trainjob}} phase={{inputs.parameters.phase}} nodes={{inputs.parameters.nodes}}"
`, url)
}

// TestDAGSucceedsWithArgosOwnControllerAndAgent: preprocess (HTTP) → train (trainstep) →
// evaluate (HTTP) reaches Succeeded, and the train step's outputs reach evaluate's request.
func TestDAGSucceedsWithArgosOwnControllerAndAgent(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	wf := harness.Submit(t, dagWorkflow(srv.URL))
	harness.RunAgent(t, wf.Name, e2eTimeout)

	got := harness.WaitPhase(t, wf.Name, e2eTimeout)
	require.Equal(t, wfv1.WorkflowSucceeded, got.Status.Phase, "%s\n%s", got.Status.Message, argoharness.Nodes(got))
	train := got.Status.Nodes.FindByDisplayName("train")
	require.NotNil(t, train, argoharness.Nodes(got))
	require.NotNil(t, train.Outputs)
	var tjName string
	for _, p := range train.Outputs.Parameters {
		if p.Name == trainjob.OutName {
			tjName = p.Value.String()
		}
	}
	require.NotEmpty(t, tjName)
	bodies := rec.bodies()
	require.Len(t, bodies, 1, "evaluate must POST once")
	assert.Equal(t, fmt.Sprintf("trainjob=%s phase=Succeeded nodes=2", tjName), bodies[0])

	tj := &trainer.TrainJob{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: Namespace, Name: tjName}, tj))
	assert.Equal(t, wf.UID, tj.OwnerReferences[0].UID, "the Workflow owns the TrainJob")

	rss, peak, err := argoharness.RSSMB(harness.PluginPID())
	require.NoError(t, err)
	t.Logf("plugin process (executor argo-plugin): RSS %.1f MB, peak %.1f MB", rss, peak)
}

// TestStoppedWorkflowLeavesNoTrainJob: `argo stop` (spec.shutdown: Stop) while the TrainJob runs.
func TestStoppedWorkflowLeavesNoTrainJob(t *testing.T) {
	wf := harness.Submit(t, `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: train-stop-}
spec:
  entrypoint: train
  serviceAccountName: trainstep-workflow
  templates:
    - name: train
      plugin:
        trainstep:
          key: "{{node.name}}"
          framework: xgboost
          labels: {sim-mode: hold}
          trainer: {numNodes: 1, func: "def train():\n    pass\n"}
`)
	harness.RunAgent(t, wf.Name, e2eTimeout)
	var tj trainer.TrainJob
	require.Eventually(t, func() bool {
		l := &trainer.TrainJobList{}
		if c.List(t.Context(), l, client.InNamespace(Namespace), client.MatchingLabels{trainjob.LabelOwnerUID: string(wf.UID)}) != nil || len(l.Items) == 0 {
			return false
		}
		tj = l.Items[0]
		return true
	}, e2eTimeout, testenv.Interval, "the plugin must start the TrainJob")

	cur := &wfv1.Workflow{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(wf), cur))
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.Shutdown = wfv1.ShutdownStrategyStop
	require.NoError(t, c.Patch(t.Context(), cur, patch))

	got := harness.WaitPhase(t, wf.Name, e2eTimeout)
	assert.Equal(t, wfv1.WorkflowFailed, got.Status.Phase, argoharness.Nodes(got))
	require.Eventually(t, func() bool {
		l := &trainer.TrainJobList{}
		return c.List(t.Context(), l, client.InNamespace(Namespace), client.MatchingLabels{trainjob.LabelOwnerUID: string(wf.UID)}) == nil && len(l.Items) == 0
	}, testenv.Timeout, testenv.Interval, "TrainJob %s must be deleted", tj.Name)
}

// TestArgoRetryGetsANewTrainJob: the train step fails, the workflow fails, `argo retry` (what
// util.FormulateRetryWorkflow does to the Workflow, see retryWorkflow) and Argo's own controller
// and agent run the node again with the very same call: trainstep starts a second TrainJob
// instead of answering with the failed one, and gives it the first one's checkpoint directory on
// the same volume, so its training resumes where the first stopped.
func TestArgoRetryGetsANewTrainJob(t *testing.T) {
	wf := harness.Submit(t, `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: train-retry-}
spec:
  entrypoint: main
  serviceAccountName: trainstep-workflow
  templates:
    - name: main
      steps:
        - - {name: train, template: train}
    - name: train
      plugin:
        trainstep:
          key: "{{node.name}}"
          framework: xgboost
          labels: {sim-mode: fail}
          trainer: {numNodes: 1, func: "def train():\n    pass\n"}
          pod:
            volumes: [{name: ckpt, nfs: {server: nfs.example.com, path: /exports}}]
            volumeMounts: [{name: ckpt, mountPath: /ckpt}]
          checkpoint: {volume: ckpt}
`)
	harness.RunAgent(t, wf.Name, e2eTimeout)
	got := harness.WaitPhase(t, wf.Name, e2eTimeout)
	require.Equal(t, wfv1.WorkflowFailed, got.Status.Phase, argoharness.Nodes(got))
	first := trainJobsOf(t, wf)
	require.Len(t, first, 1, argoharness.Nodes(got))

	require.NoError(t, c.Update(t.Context(), retryWorkflow(got, harness.Release())))
	harness.RunAgent(t, wf.Name, e2eTimeout)
	got = harness.WaitPhase(t, wf.Name, e2eTimeout)
	require.Equal(t, wfv1.WorkflowFailed, got.Status.Phase, "the retried step fails again (sim-mode fail): %s", argoharness.Nodes(got))
	jobs := trainJobsOf(t, wf)
	require.Len(t, jobs, 2, "the retried node must get a TrainJob of its own: %s", argoharness.Nodes(got))
	train := got.Status.Nodes.FindByDisplayName("train")
	require.NotNil(t, train, argoharness.Nodes(got))
	var name string
	for _, p := range train.Outputs.Parameters {
		if p.Name == trainjob.OutName {
			name = p.Value.String()
		}
	}
	assert.NotEqual(t, first[0], name, "the retried node reports the new TrainJob")
	assert.Contains(t, jobs, name)

	dirs := map[string]bool{}
	for _, j := range jobs {
		tj := &trainer.TrainJob{}
		require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: Namespace, Name: j}, tj))
		require.NotNil(t, tj.Spec.Trainer, j)
		for _, e := range tj.Spec.Trainer.Env {
			if e.Name == step.CheckpointDirEnv {
				dirs[e.Value] = true
			}
		}
	}
	require.Len(t, dirs, 1, "both TrainJobs name one checkpoint directory: %v", dirs)
	for d := range dirs {
		assert.Regexp(t, `^/ckpt/checkpoints/[^/]+/[^/]+$`, d, "the step's own directory on its volume")
	}
}

func trainJobsOf(t *testing.T, wf *wfv1.Workflow) []string {
	t.Helper()
	l := &trainer.TrainJobList{}
	require.NoError(t, c.List(t.Context(), l, client.InNamespace(Namespace), client.MatchingLabels{trainjob.LabelOwnerUID: string(wf.UID)}))
	var names []string
	for _, j := range l.Items {
		names = append(names, j.Name)
	}
	return names
}

// retryWorkflow is what `argo retry` (util.FormulateRetryWorkflow and createNewRetryWorkflow)
// does, in the Argo release under test, to a failed workflow whose failed nodes are plugin steps:
// the completed labels go, status.startedAt is now, the Completed condition is false, and the
// failed execution nodes and the steps/retry nodes above them are removed. Up to v3.7 the phase
// (and its label) becomes Running; from v4.0 the phase becomes Unknown ("") and the label is left,
// and a v4 controller starts nothing for a workflow retried the v3 way. Calling Argo's function
// itself would link its API server (argo-events, SQL drivers with cgo) into this suite.
func retryWorkflow(wf *wfv1.Workflow, release string) *wfv1.Workflow {
	n := wf.DeepCopy()
	delete(n.Labels, "workflows.argoproj.io/completed")
	delete(n.Labels, "workflows.argoproj.io/workflow-archiving-status")
	n.Status.Conditions.UpsertCondition(wfv1.Condition{Status: metav1.ConditionFalse, Type: wfv1.ConditionTypeCompleted})
	if strings.HasPrefix(release, "v3.") || release == "" {
		n.Labels["workflows.argoproj.io/phase"] = string(wfv1.NodeRunning)
		n.Status.Phase = wfv1.WorkflowRunning
	} else {
		n.Status.Phase = wfv1.WorkflowUnknown
	}
	n.Status.Message = ""
	n.Status.StartedAt = metav1.Time{Time: time.Now().UTC()}
	n.Status.FinishedAt = metav1.Time{}
	n.Spec.Shutdown = ""
	// Every node here failed with the train step: the retry resets the workflow to its start.
	n.Status.Nodes = wfv1.Nodes{}
	return n
}
