package argo_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
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

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/manifest"
	"github.com/trainstep/trainstep/test/internal/argoharness"
)

// containerStepWorkflow is the WorkflowTemplate of examples/workflows/argo-container-step.yaml
// that its header submits.
const containerStepWorkflow = "trainstep-train-example"

var (
	containerStepApply  = regexp.MustCompile(`(?m)^#\s+kubectl apply -n (\S+) -f (examples/workflows/argo-container-step\.yaml)\s*$`)
	containerStepSubmit = regexp.MustCompile(`(?m)^#\s+argo submit -n (\S+) --watch --from workflowtemplate/(\S+)\s*$`)
)

// TestArgoContainerStepExampleRunsAsWritten: examples/workflows/argo-container-step.yaml does
// what its header says, through Argo's own workflow-controller on the real Trainer stack:
// `kubectl apply -n argo -f` of every document (the WorkflowTemplates, the ServiceAccount and its
// rights: a server-side apply of each, as kubectl applies), then `argo submit --from
// workflowtemplate/…` (a Workflow that references the template, as Argo's CLI makes it). Every
// pod really runs: the train step's pod runs this tree's executor as the trainstep image holds it,
// with the step file Argo's init container wrote from the raw artifact, as the ServiceAccount the
// file makes (so its Role and ClusterRole are enough); the TrainJob's pods run the function; the
// outputs come back through valueFrom.path to the next step.
func TestArgoContainerStepExampleRunsAsWritten(t *testing.T) {
	dumpPodsOnFailure(t)
	file := filepath.Join("..", "..", "..", "examples", "workflows", "argo-container-step.yaml")
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	apply := containerStepApply.FindSubmatch(b)
	require.NotNil(t, apply, "the header must say how to install it (kubectl apply -n … -f …)")
	submit := containerStepSubmit.FindSubmatch(b)
	require.NotNil(t, submit, "the header must say how to run it (argo submit -n … --watch --from workflowtemplate/…)")
	require.Equal(t, argoharness.Namespace, string(apply[1]), "the header's namespace is the one the harness's controller manages")
	require.Equal(t, argoharness.Namespace, string(submit[1]))
	require.Equal(t, containerStepWorkflow, string(submit[2]), "the suite serves the pods of the workflows the header submits")

	applyAll(t, file, argoharness.Namespace)
	// What `argo submit --from workflowtemplate/NAME` creates.
	wf := harness.Submit(t, "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata: {generateName: "+containerStepWorkflow+"-}\n"+
		"spec: {workflowTemplateRef: {name: "+containerStepWorkflow+"}}\n")
	got := harness.WaitPhase(t, wf.Name, argoharness.ExampleTimeout)
	require.Equal(t, wfv1.WorkflowSucceeded, got.Status.Phase, "%s\n%s", got.Status.Message, argoharness.Nodes(got))

	train := argoharness.NodeOf(got, "train")
	require.NotNil(t, train, argoharness.Nodes(got))
	require.NotNil(t, train.Outputs, argoharness.Nodes(got))
	name := argoharness.ParamOf(train.Outputs.Parameters, trainjob.OutName)
	assert.True(t, strings.HasPrefix(name, "recipe-"), "the TrainJob is named after the step's namePrefix: %q", name)
	assert.Equal(t, "Succeeded", argoharness.ParamOf(train.Outputs.Parameters, trainjob.OutPhase))
	assert.Equal(t, "3.0", argoharness.ParamOf(train.Outputs.Parameters, "result-w"), "what the function returned on rank 0")

	// The real Trainer completed the TrainJob from its pods, which ran the function; the step pod
	// owns it, as the recipe's env says.
	tj := &trainer.TrainJob{}
	require.NoError(t, stack.Client.Get(t.Context(), client.ObjectKey{Namespace: argoharness.Namespace, Name: name}, tj))
	assert.True(t, apimeta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete), "%+v", tj.Status.Conditions)
	require.Len(t, tj.OwnerReferences, 1)
	assert.Equal(t, "Pod", tj.OwnerReferences[0].Kind)
	pods := &corev1.PodList{}
	require.NoError(t, stack.Client.List(t.Context(), pods, client.InNamespace(argoharness.Namespace),
		client.MatchingLabels{trainjob.LabelJobSetName: name}))
	require.Len(t, pods.Items, 2, "two training nodes")
	for _, p := range pods.Items {
		require.True(t, stack.Serves(&p), "pod %s runs through the pod runner", p.Name)
		assert.Equal(t, corev1.PodSucceeded, p.Status.Phase, "pod %s", p.Name)
	}

	report := argoharness.PodOfStep(t, stack.Client, wf.Name, "report")
	log := harness.Pods.Log(report.Namespace, report.Name, "main")
	assert.Contains(t, log, "TrainJob "+name+" learnt w=3.0", "report's log:\n%s", log)
}

// applyAll does `kubectl apply -n ns -f file`; the cluster-scoped objects are deleted when the
// test ends.
func applyAll(t *testing.T, file, ns string) {
	t.Helper()
	objs, err := manifest.Objects(file)
	require.NoError(t, err)
	clusterScoped, err := manifest.Apply(t.Context(), stack.Client, objs, ns)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), time.Minute)
		defer cancel()
		for _, u := range clusterScoped {
			assert.NoError(t, client.IgnoreNotFound(stack.Client.Delete(ctx, u)))
		}
	})
	require.NoError(t, err)
}
