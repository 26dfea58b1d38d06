package conformance_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/lifecycle"
	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/realstack"
)

// scenario is one step and how it must end, whichever face runs it.
type scenario struct {
	name string
	// step is the trainstep step document, the same for every face.
	step string
	// setup prepares namespace ns before the step starts; action acts on the running step.
	setup  func(t *testing.T, ns string)
	action func(t *testing.T, r *running)
	want   want
	// also checks what else the step left in the cluster, beyond what every scenario checks.
	also func(t *testing.T, got result)
	// lacks says why the stack's release cannot run the scenario ("" when it can).
	lacks func() string
	// skip names the faces that cannot run the scenario, with why.
	skip map[string]string
}

// want is a step's end in the core's terms.
type want struct {
	// phase is the core's phase (or stopped); reason the core's reason ("" when the core
	// gives none); message a regexp the message matches.
	phase, reason, message string
	// outputs maps an output's name to a regexp its value matches; jsonOutputs to the JSON
	// its value equals.
	outputs, jsonOutputs map[string]string
	// waiting is a regexp what the face said while the step ran matches.
	waiting string
	// trainJob is what is left of the step's TrainJob: gone, kept, or anything ("").
	trainJob string
}

// What a step leaves of its TrainJob.
const (
	gone = "gone"
	kept = "kept"
)

func (sc scenario) prepare(t *testing.T, ns string) {
	if sc.setup != nil {
		sc.setup(t, ns)
	}
}

func (sc scenario) act(t *testing.T, r *running) {
	if sc.action != nil {
		sc.action(t, r)
	}
}

// stopOnceStarted stops the step once its TrainJob started, as the engine's user would.
func stopOnceStarted(t *testing.T, r *running) {
	r.started(t)
	r.stop(t)
}

// deleteOnceStarted deletes the step's TrainJob once it started, as a user with kubectl would.
func deleteOnceStarted(t *testing.T, r *running) {
	tj := r.started(t)
	require.NoError(t, client.IgnoreNotFound(stack.Client.Delete(t.Context(), tj)))
}

// scenarios is the table every face runs. The trainer's env drives kwok's stages
// (test/internal/realstack/stages): KWOK_FAIL fails a node, KWOK_HOLD keeps it running,
// KWOK_TERMINATION_MESSAGE is node-0's termination message as the training script writes it.
// Every step names its runtime: the table installs a second torch runtime (torch-no-retry), and a
// step naming none would be refused, the framework's runtime being ambiguous.
func scenarios() []scenario {
	const returned = `{"loss": 0.1, "model_uri": "s3://bucket/model", "epochs": [1, 2]}`
	return []scenario{{
		name: "SucceedsWithTheReturnValue",
		step: `
framework: torch
runtime: {name: torch-distributed, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 2
  env:
    KWOK_RUN_SECONDS: "2"
    KWOK_TERMINATION_MESSAGE: '{"trainstep.dev/result": ` + returned + `}'
  func: |
    def train():
        return ` + returned + `
timeout: 3m
`,
		want: want{phase: "Succeeded",
			outputs: map[string]string{
				trainjob.OutName:     `^\S+$`,
				trainjob.OutRuntime:  `^torch-distributed$`,
				trainjob.OutNumNodes: `^2$`,
				"result-loss":        `^0\.1$`,
				"result-model_uri":   `^s3://bucket/model$`,
				"result-epochs":      `^\[1,2\]$`,
			},
			jsonOutputs: map[string]string{trainjob.OutResult: returned}},
		also: returnedByThePod,
	}, {
		name: "AFailedNodeWithItsLogTail",
		step: `
framework: torch
runtime: {name: ` + realstack.NoRetryRuntime + `, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 2
  env: {KWOK_FAIL: "1"}
  func: |
    def train():
        raise SystemExit(1)
timeout: 3m
`,
		// The Trainer's own reason; the failing node named, with the tail of its log read
		// through pods/log (realstack.NodeLog, which kwok serves for every pod).
		want: want{phase: "Failed", reason: "FailedJobs",
			message: `(?s)^jobset failed due to one or more job failures .*node \d \(pod \S+\) failed \(exit code 1\).*last lines of \S+:\n` +
				regexp.QuoteMeta(strings.Join(realstack.NodeLog, "\n")),
			outputs: map[string]string{trainjob.OutName: `^\S+$`}},
	}, {
		name: "AnInvalidJobTheApiserverRefuses",
		// Half a GPU: neither the TrainJob CRD nor either webhook checks that an extended
		// resource is whole; the apiserver refuses the Job and only JobSet's Event says so.
		step: `
framework: torch
runtime: {name: torch-distributed, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 2
  resourcesPerNode: {gpu: "0.5"}
  func: |
    def train():
        pass
timeout: 30m
startTimeout: 20m
`,
		want: want{phase: "Failed", reason: trainjob.ReasonJobCreationFailed,
			message:  `(?s)the apiserver refuses its Job \S+ as invalid.*creation failed with error: Job\.batch.*must be an integer`,
			trainJob: gone},
		// test/realstack's TestInvalidJobFailsTheStepAtOnceInJobSetsWords has what happens there.
		lacks: func() string {
			if _, jobset, err := realstack.Release(stack.Assets); err == nil && minorOf(jobset) < 11 {
				return fmt.Sprintf("JobSet %s records no JobCreationFailed Event for a Job the apiserver refuses: the step fails at its startTimeout", jobset)
			}
			return ""
		},
	}, {
		name: "UnschedulableUntilStartTimeout",
		step: fmt.Sprintf(`
framework: torch
runtime: {name: torch-distributed, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 1
  resourcesPerNode: {gpu: %d}
  func: |
    def train():
        pass
timeout: 5m
startTimeout: 20s
`, realstack.NodeGPUs*2),
		want: want{phase: "Failed", reason: trainjob.ReasonStartTimeout,
			message:  `(?s)did not start within 20s \(startTimeout\); it was deleted.*cannot be scheduled.*Insufficient nvidia\.com/gpu`,
			waiting:  `cannot be scheduled: .*Insufficient nvidia\.com/gpu`,
			trainJob: gone},
	}, {
		name: "TimesOutAndDeletes",
		step: `
framework: torch
runtime: {name: torch-distributed, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 2
  env: {KWOK_HOLD: "1"}
  func: |
    def train():
        pass
timeout: 20s
`,
		want: want{phase: "TimedOut", reason: trainjob.ReasonTimeout, trainJob: gone},
	}, {
		name: "TimesOutAndKeepsOnTimeout",
		step: `
framework: torch
runtime: {name: torch-distributed, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 2
  env: {KWOK_HOLD: "1"}
  func: |
    def train():
        pass
timeout: 20s
keepOnTimeout: true
`,
		want: want{phase: "TimedOut", reason: trainjob.ReasonTimeout, message: `kept \(keepOnTimeout\)`, trainJob: kept},
	}, {
		name: "StoppedWhileRunning",
		step: `
framework: torch
runtime: {name: torch-distributed, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 2
  env: {KWOK_HOLD: "1"}
  func: |
    def train():
        pass
timeout: 5m
`,
		action: stopOnceStarted,
		want:   want{phase: stopped, trainJob: gone},
	}, {
		name: "TrainJobDeletedWhileRunning",
		step: `
framework: torch
runtime: {name: torch-distributed, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 2
  env: {KWOK_HOLD: "1"}
  func: |
    def train():
        pass
timeout: 5m
`,
		action: deleteOnceStarted,
		want:   want{phase: "Failed", reason: lifecycle.ReasonTrainJobDeleted, trainJob: gone},
	}}
}

// TestConformance runs every scenario through every face, all at once (the Argo face's steps one
// at a time: argoRuns): each step has its own namespace (Argo: its own Workflow), and none
// changes what the stack shares (the node log is realstack.NodeLog throughout).
func TestConformance(t *testing.T) {
	// Installed for the whole table: a subtest's cleanup must not delete it under another.
	stack.InstallNoRetryRuntime(t)
	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			for _, f := range faces {
				t.Run(f.name(), func(t *testing.T) {
					if why, ok := sc.skip[f.name()]; ok {
						t.Skip(why)
					}
					if sc.lacks != nil {
						if why := sc.lacks(); why != "" {
							realstack.Lacks(t, "%s", why)
							t.Skip(why)
						}
					}
					t.Parallel()
					got := f.run(t, sc)
					check(t, sc.want, got)
					if sc.also != nil {
						sc.also(t, got)
					}
				})
			}
		})
	}
}

// check asserts that a face's result is the scenario's.
func check(t *testing.T, w want, got result) {
	t.Helper()
	t.Logf("ended %s, reason %q, phase output %q", got.phase, got.reason, got.outputs[trainjob.OutPhase])
	assert.Equal(t, w.phase, got.phase, "phase; message: %s", got.message)
	if p, ok := got.outputs[trainjob.OutPhase]; ok && w.phase != stopped {
		assert.Equal(t, w.phase, p, "the phase output")
	}
	if w.reason != "" {
		assert.Equal(t, w.reason, got.reason, "reason; message: %s", got.message)
	}
	if w.message != "" {
		assert.Regexp(t, w.message, got.message)
	}
	for k, re := range w.outputs {
		assert.Regexp(t, re, got.outputs[k], "output %s", k)
	}
	for k, js := range w.jsonOutputs {
		assert.JSONEq(t, js, got.outputs[k], "output %s", k)
	}
	if w.waiting != "" {
		assert.Regexp(t, w.waiting, got.waiting, "while the step ran")
	}
	switch w.trainJob {
	case gone:
		require.Eventually(t, func() bool { return len(got.step.trainJobs(t)) == 0 }, timeout, interval, "the TrainJob must be deleted")
	case kept:
		tjs := got.step.trainJobs(t)
		require.Len(t, tjs, 1)
		tj := &tjs[0]
		t.Cleanup(func() {
			_ = stack.Client.Delete(context.Background(), &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: tj.Namespace, Name: tj.Name}})
		})
		assert.True(t, trainjob.Kept(tj), "annotations: %v", tj.Annotations)
		assert.NotContains(t, got.message, "could not be marked kept")
		// Nothing collects it with the step's owner, and it still trains.
		assert.Empty(t, tj.OwnerReferences)
		assert.Nil(t, tj.DeletionTimestamp)
		assert.False(t, trainjob.Observe(tj, nil).Phase.Terminal(), "it still trains: %+v", tj.Status.Conditions)
	}
}

// returnedByThePod: the return value really is node-0's termination message, as the kubelet
// reports it (kwok sets what the container's KWOK_TERMINATION_MESSAGE holds).
func returnedByThePod(t *testing.T, got result) {
	pods := &corev1.PodList{}
	require.NoError(t, stack.Client.List(t.Context(), pods, client.InNamespace(got.step.ns),
		client.MatchingLabels{trainjob.LabelJobSetName: got.outputs[trainjob.OutName]}))
	require.NotEmpty(t, pods.Items)
	for _, p := range pods.Items {
		require.NotEmpty(t, p.Status.ContainerStatuses, "pod %s", p.Name)
		require.NotNil(t, p.Status.ContainerStatuses[0].State.Terminated, "pod %s", p.Name)
		assert.Contains(t, p.Status.ContainerStatuses[0].State.Terminated.Message, "trainstep.dev/result", "pod %s", p.Name)
	}
}

// minorOf is the minor version of a release (v0.11.1: 11), -1 when it has none.
func minorOf(release string) int {
	parts := strings.Split(strings.TrimPrefix(release, "v"), ".")
	if len(parts) < 2 {
		return -1
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil {
		return -1
	}
	return n
}
