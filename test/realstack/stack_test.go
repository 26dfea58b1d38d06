package realstack_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/test/internal/realstack"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// Waits poll for a state with these bounds; nothing sleeps to synchronise. Generous: the stack
// shares 2 cores with the test and the pods' stages have delays of a few seconds each.
const (
	timeout  = 3 * time.Minute
	interval = 200 * time.Millisecond
)

func TestTrainerWebhookRejectsAnUnknownRuntime(t *testing.T) {
	t.Parallel()
	ns := stack.Namespace(t)
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "no-runtime", Namespace: ns},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{
			Name: "no-such-runtime", APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.ClusterTrainingRuntimeKind),
		}},
	}
	err := stack.Client.Create(t.Context(), tj)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request`)
	assert.Contains(t, err.Error(), "specified clusterTrainingRuntime must be created before the TrainJob is created")
}

// The known defect: JobSet's webhook refuses a JobSet whose pod names would pass 63 characters,
// and the JobSet is named after the TrainJob, so a long TrainJob name on a runtime with a
// dataset-initializer stays Pending with an Event.
func TestJobSetWebhookRefusesALongNameOnTheTorchTuneRuntime(t *testing.T) {
	t.Parallel()
	ns := stack.Namespace(t)
	require.Contains(t, stack.Runtimes, "torchtune-llama3.2-1b")
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "train-dag-x7k2p-train-5383618e4f03", Namespace: ns},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{
			Name: "torchtune-llama3.2-1b", APIGroup: ptr.To(trainer.GroupVersion.Group), Kind: ptr.To(trainer.ClusterTrainingRuntimeKind),
		}},
	}
	require.NoError(t, stack.Client.Create(t.Context(), tj))
	var msg string
	require.Eventually(t, func() bool {
		evs := &corev1.EventList{}
		if err := stack.Client.List(t.Context(), evs, client.InNamespace(ns)); err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == tj.Name && e.Reason == "TrainJobResourcesCreationFailed" {
				msg = e.Message
				return true
			}
		}
		return false
	}, timeout, interval, "no TrainJobResourcesCreationFailed Event for TrainJob %s/%s", ns, tj.Name)
	js := &unstructured.Unstructured{}
	js.SetGroupVersionKind(schema.GroupVersionKind{Group: "jobset.x-k8s.io", Version: "v1alpha2", Kind: "JobSet"})
	assert.True(t, apierrors.IsNotFound(stack.Client.Get(t.Context(), client.ObjectKeyFromObject(tj), js)), "no JobSet is made")
	if !strings.Contains(msg, "vjobset.kb.io") && !pinnedRelease(t) {
		// v2.2 applies the JobSet by server-side apply, and its Event loses the webhook's words.
		realstack.Lacks(t, "Trainer %s's Event does not carry JobSet's words (%q): trainstep's names keep clear of the limit either way", trainerRelease(t), msg)
		return
	}
	assert.Contains(t, msg, "vjobset.kb.io")
	assert.Contains(t, msg, "will exceed 63 characters")
}

// executor runs the real binary against the stack to its end, as a pipeline step would.
func executor(t *testing.T, ns, step string, extra ...string) realstack.ExecutorResult {
	t.Helper()
	return startExecutor(t, ns, step, extra...).Result(t)
}

// startExecutor starts the real binary against the stack, so a test can act while the step waits.
func startExecutor(t *testing.T, ns, step string, extra ...string) *realstack.Executor {
	t.Helper()
	return stack.StartExecutor(t, bin, ns, step, timeout, extra...)
}

// refusedAtPlan checks a step the installed Trainer cannot run was refused by name before
// anything was made: exit 2, every want in its stderr, no TrainJob.
func refusedAtPlan(t *testing.T, ns string, r realstack.ExecutorResult, wants ...string) {
	t.Helper()
	assert.Equal(t, cli.ExitInvalid, r.Code, "stderr:\n%s", r.Stderr)
	for _, w := range wants {
		assert.Contains(t, r.Stderr, w)
	}
	assert.Empty(t, testenv.TrainJobs(t.Context(), t, stack.Client, ns), "nothing is created")
}

// podsOfSucceededStep checks the step succeeded and returns the pods it left in ns, n of them.
func podsOfSucceededStep(t *testing.T, ns string, r realstack.ExecutorResult, n int) []corev1.Pod {
	t.Helper()
	require.Equal(t, cli.ExitSucceeded, r.Code, "stderr:\n%s\nstdout:\n%s", r.Stderr, r.Stdout)
	pods := &corev1.PodList{}
	require.NoError(t, stack.Client.List(t.Context(), pods, client.InNamespace(ns)))
	require.Len(t, pods.Items, n)
	return pods.Items
}

const torchStep = `
framework: torch
trainer:
  numNodes: 2
  env: {KWOK_RUN_SECONDS: "2"}
  func: |
    def train():
        print("hello from the real stack")
timeout: 3m
`

func TestExecutorRunsATorchStepToSucceeded(t *testing.T) {
	t.Parallel()
	ns := stack.Namespace(t)
	r := executor(t, ns, torchStep)
	pods := podsOfSucceededStep(t, ns, r, 2)
	assert.Equal(t, "Succeeded", r.Outputs["phase"])
	assert.Equal(t, "torch-distributed", r.Outputs["runtime"])
	// node-0's log, followed through pods/log (kwok serves it), and the progress on the way.
	for _, line := range realstack.NodeLog {
		assert.Contains(t, r.Stdout, line)
	}
	assert.Contains(t, r.Stderr, "Running: TrainJob "+r.Outputs["trainjob-name"]+" is running: 2/2 nodes")

	// The pods really were Job pods of the JobSet, scheduled on kwok Nodes.
	for _, p := range pods {
		assert.Contains(t, stack.Nodes, p.Spec.NodeName, "pod %s", p.Name)
		assert.Equal(t, corev1.PodSucceeded, p.Status.Phase, "pod %s", p.Name)
		assert.NotEmpty(t, p.Labels["jobset.sigs.k8s.io/jobset-name"], "pod %s", p.Name)
		assert.NotEmpty(t, p.Labels["batch.kubernetes.io/job-completion-index"], "pod %s", p.Name)
	}
}

// kube-scheduler really places pods by the kwok Nodes' capacity: a node asking for more GPUs
// than any Node has stays Pending, Unschedulable; the step is then interrupted, as a pipeline
// engine would on cancel, and deletes its TrainJob.
func TestStepAskingForMoreGPUsThanAnyNodeStaysUnschedulable(t *testing.T) {
	t.Parallel()
	ns := stack.Namespace(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "step.yaml")
	require.NoError(t, os.WriteFile(file, []byte(fmt.Sprintf(`
framework: torch
trainer:
  numNodes: 1
  resourcesPerNode: {gpu: %d}
  func: |
    def train():
        pass
timeout: 5m
`, realstack.NodeGPUs*2)), 0o644))
	cmd := exec.CommandContext(t.Context(), bin, "run", "--namespace", ns, "-f", file, "--output-dir", filepath.Join(dir, "out"))
	cmd.Env = append(os.Environ(), "KUBECONFIG="+stack.Kubeconfig)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	require.NoError(t, cmd.Start())

	var msg string
	require.Eventually(t, func() bool {
		pods := &corev1.PodList{}
		if err := stack.Client.List(t.Context(), pods, client.InNamespace(ns)); err != nil {
			return false
		}
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
					msg = c.Message
					return true
				}
			}
		}
		return false
	}, timeout, interval, "no pod was found Unschedulable")
	assert.Contains(t, msg, "Insufficient nvidia.com/gpu")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	err := cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, stderr.String())
	assert.Equal(t, cli.ExitInterrupts, ee.ExitCode(), stderr.String())
	assert.Contains(t, stderr.String(), "deleted TrainJob")
}
