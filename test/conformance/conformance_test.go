package conformance_test

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/lifecycle"
	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/stepcache"
	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/realstack"
)

// scenario is one step and how it must end, whichever face runs it.
type scenario struct {
	name string
	// step is the trainstep step document, the same for every face.
	step string
	// ownNode, when set, gives the step a Node of its own (stack.PrivateNode), which the step
	// names nodeName (in its pod.nodeSelector and the toleration of its taint) and an action may
	// cordon.
	ownNode bool
	// queue, when set, puts the step in a Kueue queue of its own (stack.KueueQueue in the step's
	// namespace): the step and the wanted messages name it queueName.
	queue *queue
	// upgrade, when set, has the release before this one make the step's TrainJob before the
	// face first looks (createPrevious), as an upgrade of trainstep mid-step leaves it.
	upgrade bool
	// retries is how often the step's engine runs it again after it failed: Argo's retryStrategy,
	// Tekton's retries, and for `executor run` the engine running the container step again with
	// the next --attempt, as Argo's retryStrategy does with "{{retries}}".
	retries int
	// earlier, when set, first runs the step it makes of the scenario's step (sameStep: the
	// step itself) to its end, as an earlier run of the pipeline: another Workflow, PipelineRun or
	// --owner-uid, in the same namespace, without retries.
	earlier func(doc string) string
	// alongside runs the earlier run at the same time as the checked one: the checked run
	// starts once the earlier one's TrainJob exists, and the earlier run must succeed too.
	alongside bool
	// setup prepares the step's namespace before the step starts; action acts on the running step.
	setup  func(t *testing.T, r *running)
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
	// jobs, when set, is how many TrainJobs the checked run made and left (its earlier run's not
	// counted): the pair table states it for each of its scenarios.
	jobs *jobCount
}

// What a step leaves of its TrainJob.
const (
	gone = "gone"
	kept = "kept"
)

// pullBackOff and missingSecret are what the kubelet (kwok, for it) says of a pod waiting on an
// image it cannot pull and on the Secret of a volume that does not exist.
var (
	pullBackOff   = regexp.QuoteMeta(`ImagePullBackOff: Back-off pulling image "registry.example.com/no-such/image:1"`)
	missingSecret = regexp.QuoteMeta(fmt.Sprintf(`cannot mount its volumes: MountVolume.SetUp failed for volume %q : secret %q not found`,
		realstack.MissingSecretVolume, realstack.MissingSecret))
)

// queue is a step's Kueue queue: a ClusterQueue whose binding quota is gpus GPUs. Every Kueue
// scenario asks for one GPU and blocks with one: the table runs at once, and Kueue's quota is not
// the Nodes' capacity, so a pod left Pending by other scenarios' GPUs would be evicted by
// waitForPodsReady and change the counts a scenario asserts.
type queue struct{ gpus int }

// queueName stands for the step's queue in a scenario's step and wanted messages, nodeName for
// its own Node in its step.
const (
	queueName = "QUEUE_NAME"
	nodeName  = "NODE_NAME"
)

// prepare makes what the step needs in r's namespace (its queue, then setup's) and returns the
// step as the face submits it.
func (sc scenario) prepare(t *testing.T, r *running) string {
	r.made = recordMade(t, r.ns)
	if sc.queue != nil {
		r.queue = stack.KueueQueue(t, r.ns, sc.queue.gpus)
	}
	if sc.ownNode {
		r.node = stack.PrivateNode(t)
	}
	if sc.setup != nil {
		sc.setup(t, r)
	}
	return strings.NewReplacer(queueName, r.queue, nodeName, r.node, denyValue, r.deny).Replace(sc.step)
}

// in is w with queueName in its regexps replaced by the step's queue.
func (w want) in(queue string) want {
	q := regexp.QuoteMeta(queue)
	w.message = strings.ReplaceAll(w.message, queueName, q)
	w.waiting = strings.ReplaceAll(w.waiting, queueName, q)
	return w
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
	return append([]scenario{{
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
				trainjob.OutName:         `^\S+$`,
				trainjob.OutRuntime:      `^torch-distributed$`,
				trainjob.OutNumNodes:     `^2$`,
				"result-loss":            `^0\.1$`,
				"result-model_uri":       `^s3://bucket/model$`,
				"result-epochs":          `^\[1,2\]$`,
				trainjob.OutFailureClass: `^$`,
				trainjob.OutRetryable:    `^$`,
				// Its nodes ran KWOK_RUN_SECONDS, asking for no accelerator; a first attempt.
				trainjob.OutTraining: `^([2-9]|\d\d+)$`,
				trainjob.OutGPUHours: `^0$`,
				trainjob.OutLost:     `^0$`,
			},
			jsonOutputs: map[string]string{trainjob.OutResult: returned}},
		also: returnedByThePod,
	}, {
		name: "GPUHoursFromResourcesPerNode",
		// 2 nodes of 2 GPUs each, from the step's resourcesPerNode: gpu-hours is 4 × the
		// training time, on every face (the Argo and Tekton faces' caches keep no resources).
		step: `
framework: torch
runtime: {name: torch-distributed, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 2
  resourcesPerNode: {gpu: 2}
  env: {KWOK_RUN_SECONDS: "6"}
  func: |
    def train():
        pass
timeout: 3m
`,
		want: want{phase: "Succeeded", outputs: map[string]string{trainjob.OutTraining: `^([6-9]|\d\d+)$`, trainjob.OutLost: `^0$`}},
		also: gpuHoursAre(2 * 2),
	}, {
		name: "GPUHoursFromTheRuntime",
		// The same GPUs from the runtime's node container, the step asking for none.
		step: `
framework: torch
runtime: {name: ` + realstack.GPURuntime + `, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 2
  env: {KWOK_RUN_SECONDS: "6"}
  func: |
    def train():
        pass
timeout: 3m
`,
		want: want{phase: "Succeeded", outputs: map[string]string{trainjob.OutTraining: `^([6-9]|\d\d+)$`, trainjob.OutLost: `^0$`}},
		also: gpuHoursAre(realstack.GPURuntimeGPUs * 2),
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
			outputs: failedAs(trainjob.ClassCode, false, map[string]string{trainjob.OutName: `^\S+$`})},
	}, {
		name: "AnOOMKilledNode",
		// kwok records what the kubelet does for a container the kernel killed for memory.
		step: failingStep(`KWOK_FAIL_REASON: OOMKilled, KWOK_FAIL_EXIT_CODE: "137"`),
		want: want{phase: "Failed", reason: "FailedJobs",
			message: `(?s)node 0 \(pod \S+\) failed \(exit code 137, OOMKilled\)`,
			outputs: failedAs(trainjob.ClassOOM, true, nil)},
	}, {
		name: "ANodePreemptedByTheScheduler",
		// The scheduler's DisruptionTarget condition on the pod it preempts, as kwok plays it.
		step: failingStep(`KWOK_DISRUPTION: PreemptionByScheduler`),
		want: want{phase: "Failed", reason: "FailedJobs",
			message: `(?s)node 0 \(pod \S+\) failed \(exit code 137\), disrupted: PreemptionByScheduler`,
			outputs: failedAs(trainjob.ClassPreempted, true, nil)},
	}, {
		name: "ANodeLost",
		// The taint manager's DisruptionTarget condition on the pods of a node that went away.
		step: failingStep(`KWOK_DISRUPTION: DeletionByTaintManager`),
		want: want{phase: "Failed", reason: "FailedJobs",
			message: `(?s)node 0 \(pod \S+\) failed \(exit code 137\), disrupted: DeletionByTaintManager`,
			outputs: failedAs(trainjob.ClassNodeLost, true, nil)},
	}, {
		name: "AFailingInitializer",
		// A dataset that cannot be downloaded: the message names the initializer's pod, its exit
		// and termination message, and its own log tail (not a container "node" it lacks).
		step: `
framework: torch
runtime: {name: ` + failingInitRuntime + `, kind: ClusterTrainingRuntime}
initializer:
  dataset:
    storageUri: hf://trainstep/no-such-dataset
    env: {KWOK_FAIL: "1"}
trainer:
  numNodes: 1
  func: |
    def train():
        pass
timeout: 3m
`,
		want: want{phase: "Failed", reason: "FailedJobs",
			message: `(?s)dataset-initializer 0 \(pod \S+\) failed \(exit code 1\): KWOK_FAIL=1.*\(container dataset-initializer\):\n` +
				regexp.QuoteMeta(strings.Join(realstack.NodeLog, "\n")),
			outputs: failedAs(trainjob.ClassInitializer, true, nil)},
		also: func(t *testing.T, got result) {
			assert.NotContains(t, got.message, "no trainer pods")
			assert.NotContains(t, got.message, "is not valid for pod", "the tail is asked of the initializer's own container")
		},
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
			outputs:  failedAs(trainjob.ClassInvalid, false, nil),
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
		step: unschedulableStep("20s"),
		want: want{phase: "Failed", reason: trainjob.ReasonStartTimeout,
			message:  `(?s)did not start within 20s \(startTimeout\); it was deleted.*cannot be scheduled.*Insufficient nvidia\.com/gpu`,
			waiting:  `cannot be scheduled: .*Insufficient nvidia\.com/gpu`,
			outputs:  failedAs(trainjob.ClassUnschedulable, true, nil),
			trainJob: gone},
	}, {
		name: "startTimeout+engineRetry/ARetryCountsTheAttemptAStartTimeoutDeletedAsLost",
		// Both of the engine's attempts wait for GPUs no Node has, each until its startTimeout
		// deletes its TrainJob: the second's lost-seconds is the first attempt's time, though
		// its TrainJob is gone.
		step:    unschedulableStep("15s"),
		retries: 1,
		want:    want{jobs: &jobCount{made: 2, left: 0}, phase: "Failed", reason: trainjob.ReasonStartTimeout, outputs: failedAs(trainjob.ClassUnschedulable, true, nil), trainJob: gone},
		also:    lostAtLeast(15),
		skip: map[string]string{"cli": "no engine tells `executor run` when the step's first attempt began (docs/cost.md): it counts " +
			"from earlier attempts' TrainJobs still in the cluster, and a startTimeout deleted this one's"},
	}, {
		name: "AnImageThatCannotBePulledUntilStartTimeout",
		// kwok plays the kubelet's ImagePullBackOff (stages/pod-image-pull-backoff.yaml). The
		// step says so while it waits; startTimeout leaves room for the pod to be made and back
		// off on a loaded machine (10 s did not, with builds beside it).
		step: `
framework: torch
runtime: {name: torch-distributed, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 1
  kind: CustomTrainerContainer
  image: registry.example.com/no-such/image:1
  command: [python, /app/train.py]
  env: {KWOK_IMAGE_PULL_BACKOFF: "1"}
timeout: 5m
startTimeout: 30s
`,
		want: want{phase: "Failed", reason: trainjob.ReasonStartTimeout,
			message:  `(?s)did not start within 30s \(startTimeout\); it was deleted.*` + pullBackOff,
			waiting:  pullBackOff,
			outputs:  failedAs(trainjob.ClassImage, true, nil),
			trainJob: gone},
	}, {
		name: "AQuotaRefusesItsPodsUntilStartTimeout",
		// A ResourceQuota that allows none of the step's pods (scoped to its runtime's
		// PriorityClass, so it refuses no other step's in Argo's shared namespace): the Job
		// controller's FailedCreate is the only record. The step says so while it waits and at
		// its startTimeout, and a quota may free up: retryable.
		setup: quotaOfNoPods,
		step: `
framework: torch
runtime: {name: ` + realstack.QuotaRuntime + `, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 1
  func: |
    def train():
        pass
timeout: 5m
startTimeout: 30s
`,
		want: want{phase: "Failed", reason: trainjob.ReasonStartTimeout,
			message:  `(?s)did not start within 30s \(startTimeout\); it was deleted.*is forbidden: exceeded quota: ` + noPodsQuota,
			waiting:  `is forbidden: exceeded quota: ` + noPodsQuota,
			outputs:  failedAs(trainjob.ClassRefused, true, nil),
			trainJob: gone},
	}, {
		name: "PodSecurityRefusesItsPodsUntilStartTimeout",
		// A namespace where Pod Security Admission enforces restricted, which the runtime's pods
		// do not meet: the Job controller's FailedCreate again, but a refusal that does not pass
		// by itself.
		setup: enforceRestricted,
		step: `
framework: torch
runtime: {name: torch-distributed, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 1
  func: |
    def train():
        pass
timeout: 5m
startTimeout: 30s
`,
		want: want{phase: "Failed", reason: trainjob.ReasonStartTimeout,
			message:  `(?s)did not start within 30s \(startTimeout\); it was deleted.*is forbidden: violates PodSecurity "restricted:latest"`,
			waiting:  `is forbidden: violates PodSecurity "restricted:latest"`,
			outputs:  failedAs(trainjob.ClassRefused, false, nil),
			trainJob: gone},
		skip: map[string]string{"argo": "Pod Security is a namespace's label, and the Argo harness runs every step in its one " +
			"namespace, where restricted would refuse Argo's own pods; the class is the core's, from the same FailedCreate " +
			"record as AQuotaRefusesItsPodsUntilStartTimeout, which Argo runs"},
	}, {
		name: "AMissingSecretVolumeUntilStartTimeout",
		// kwok plays the kubelet's FailedMount for the one Secret no test creates
		// (stages/pod-missing-secret.yaml): only that Event on the pod says why it waits. The
		// step names the pod by its role and what is missing, while it waits and at its
		// startTimeout, and no retry helps.
		step: fmt.Sprintf(`
framework: torch
runtime: {name: torch-distributed, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 1
  func: |
    def train():
        pass
pod:
  volumes: [{name: %s, secret: {secretName: %s}}]
  volumeMounts: [{name: %s, mountPath: /var/run/credentials, readOnly: true}]
timeout: 5m
startTimeout: 30s
`, realstack.MissingSecretVolume, realstack.MissingSecret, realstack.MissingSecretVolume),
		want: want{phase: "Failed", reason: trainjob.ReasonStartTimeout,
			message:  `(?s)did not start within 30s.*node 0 \(pod \S+\) ` + missingSecret,
			waiting:  missingSecret,
			outputs:  failedAs(trainjob.ClassInvalid, false, nil),
			trainJob: gone},
		lacks: lacksPodBlock,
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
		want: want{phase: "TimedOut", reason: trainjob.ReasonTimeout, outputs: failedAs(trainjob.ClassTimeout, false, nil), trainJob: gone},
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
		want: want{phase: "TimedOut", reason: trainjob.ReasonTimeout, message: `kept \(keepOnTimeout\)`,
			outputs: failedAs(trainjob.ClassTimeout, false, nil), trainJob: kept},
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
		want: want{phase: "Failed", reason: lifecycle.ReasonTrainJobDeleted, outputs: failedAs(trainjob.ClassCancelled, false, nil),
			trainJob: gone},
	}, {
		name: "ForbiddenToCreateTheTrainJob",
		// The apiserver answers 403 to the create: the step fails at once, saying what to grant,
		// and nothing is left to train.
		setup: denyCreate,
		step: `
framework: torch
runtime: {name: torch-distributed, kind: ClusterTrainingRuntime}
labels: {` + denyLabel + `: "` + denyValue + `"}
trainer:
  numNodes: 1
  func: |
    def train():
        pass
timeout: 3m
`,
		want: want{phase: "Failed", reason: lifecycle.ReasonForbidden,
			message:  `(?s)trainstep may not create the TrainJob; grant it the rules trainstep's install gives .*this step may not create TrainJobs in `,
			outputs:  failedAs(trainjob.ClassRefused, false, nil),
			trainJob: gone},
	}, {
		name: "ForbiddenToDeleteAtTheTimeout",
		// The apiserver answers 403 to the delete at the step's timeout. Asking again would get
		// the same answer, so the step ends all the same, saying the job may still run and how to
		// delete it.
		setup: denyDelete,
		step: `
framework: torch
runtime: {name: torch-distributed, kind: ClusterTrainingRuntime}
labels: {` + denyLabel + `: "` + denyValue + `"}
trainer:
  numNodes: 1
  env: {KWOK_HOLD: "1"}
  func: |
    def train():
        pass
timeout: 20s
`,
		want: want{phase: "TimedOut", reason: trainjob.ReasonTimeout,
			message: `(?s)trainstep may not delete it, so it may still be running: .*this step may not delete TrainJobs in .*kubectl delete trainjob -n `},
		also: leftRunning,
	}, {
		name: "AStartedJobWhosePodIsReplaced",
		// Node 0's pod is evicted while the step's own Node is cordoned, so its replacement waits
		// for a Node past the startTimeout: a job that started is not failed for that, and the
		// step says what happened to node 0 and why its replacement waits.
		ownNode: true,
		step: `
framework: torch
runtime: {name: torch-distributed, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 2
  env: {KWOK_RUN_SECONDS: "45"}
  func: |
    def train():
        pass
pod:
  nodeSelector: {` + realstack.PrivateNodeLabel + `: ` + nodeName + `}
  tolerations: [{key: ` + realstack.PrivateNodeLabel + `, operator: Equal, value: ` + nodeName + `, effect: NoSchedule}]
timeout: 4m
startTimeout: 30s
`,
		action: evictWhileCordoned,
		want: want{phase: "Succeeded",
			waiting: `is running: 1/2 nodes; node 0 \(pod \S+\) was evicted, attempt 1: ` + regexp.QuoteMeta(evicted) +
				`; the Job is retrying it: its replacement \(pod `},
		also: func(t *testing.T, got result) {
			startRecorded(t, got)
			aloneOnItsNode(t, got)
		},
		lacks: lacksPodBlock,
	}, {
		name: "AdoptsThePreviousReleasesTrainJob",
		// trainstep was upgraded while the step ran: this release names and labels a step's
		// TrainJob differently, and finds the earlier one by its identity instead of starting a
		// second training.
		upgrade: true,
		step: `
framework: torch
runtime: {name: torch-distributed, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 1
  env: {KWOK_RUN_SECONDS: "5"}
  func: |
    def train():
        pass
timeout: 3m
`,
		want: want{phase: "Succeeded"},
		also: adoptedThePrevious,
		skip: map[string]string{"tekton": "the controller takes a CustomRun up the moment Tekton creates it, so no earlier " +
			"release's TrainJob can be put there first; test/integration/tekton's TestUpgradeMidRunAdoptsThePreviousReleasesTrainJob " +
			"starts the controller after writing it"},
	}, {
		name: "ARetryTrainsAgain",
		step: `
framework: torch
runtime: {name: ` + realstack.NoRetryRuntime + `, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 1
  env: {KWOK_FAIL: "1"}
  func: |
    def train():
        raise SystemExit(1)
timeout: 3m
`,
		retries: 1,
		// Both attempts fail; the second has a TrainJob of its own, not the first's answer again.
		want: want{phase: "Failed", reason: "FailedJobs", outputs: failedAs(trainjob.ClassCode, false, map[string]string{trainjob.OutName: `^\S+$`})},
		also: trainedTwice,
	}, {
		name: "checkpoint+engineRetry/ARetryResumesFromTheCheckpoint",
		// Attempt 0 fails (KWOK_FAIL_ATTEMPT); attempt 1, a TrainJob of its own, gets the same
		// checkpoint directory and succeeds, rank 0 writing beside its result the checkpoint it
		// resumed from. kwok writes that message as the command script would; the script itself
		// is run by internal/cli's TestLocalRetryResumesFromTheLastCheckpoint.
		step: `
framework: torch
runtime: {name: ` + realstack.NoRetryRuntime + `, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 1
  env:
    KWOK_FAIL_ATTEMPT: "0"
    KWOK_TERMINATION_MESSAGE: '{"trainstep.dev/result": {"loss": 0.25}, "trainstep.dev/resumed-from": "` + resumedFrom + `"}'
  func: |
    def train():
        pass
pod:
  volumes: [{name: ckpt, nfs: {server: nfs.example.com, path: /exports}}]
  volumeMounts: [{name: ckpt, mountPath: /ckpt}]
checkpoint: {volume: ckpt}
timeout: 3m
`,
		retries: 1,
		want: want{jobs: &jobCount{made: 2, left: 2}, phase: "Succeeded", message: `; resumed from step 40 \(attempt 1\)`, outputs: map[string]string{
			trainjob.OutAttempt: `^1$`, trainjob.OutResumedFrom: `^` + regexp.QuoteMeta(resumedFrom) + `$`, "result-loss": `^0\.25$`}},
		also:  resumedWhereTheFirstStopped,
		lacks: lacksPodBlock,
	}, {
		name: "retry+checkpoint/AnOOMKilledStepResumesInItsRetry",
		// The step's own retry (retry:), no engine retry: its first TrainJob's node is OOMKilled
		// (retryable), so trainstep makes a second, attempt 1, with the same checkpoint
		// directory; it succeeds and says what it resumed from.
		step: `
framework: torch
runtime: {name: ` + realstack.NoRetryRuntime + `, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 1
  env:
    KWOK_FAIL_ATTEMPT: "0"
    KWOK_FAIL_REASON: OOMKilled
    KWOK_FAIL_EXIT_CODE: "137"
    KWOK_TERMINATION_MESSAGE: '{"trainstep.dev/result": {"loss": 0.25}, "trainstep.dev/resumed-from": "` + resumedFrom + `"}'
  func: |
    def train():
        pass
pod:
  volumes: [{name: ckpt, nfs: {server: nfs.example.com, path: /exports}}]
  volumeMounts: [{name: ckpt, mountPath: /ckpt}]
checkpoint: {volume: ckpt}
retry: {limit: 2}
timeout: 3m
`,
		want: want{jobs: &jobCount{made: 2, left: 2}, phase: "Succeeded", message: `; resumed from step 40 \(attempt 1\)`, outputs: map[string]string{
			trainjob.OutAttempt: `^1$`, trainjob.OutResumedFrom: `^` + regexp.QuoteMeta(resumedFrom) + `$`, "result-loss": `^0\.25$`,
			trainjob.OutFailureClass: `^$`}},
		also:  retriedByTrainstep,
		lacks: lacksPodBlock,
	}, {
		name: "AFailingTrainingFunctionIsNotRetriedByTrainstep",
		// The training code failed (exit code 1): retrying is waste, so retry: makes no second
		// TrainJob.
		step: failingStep(`KWOK_FAIL_EXIT_CODE: "1"`) + "retry: {limit: 2}\n",
		want: want{phase: "Failed", reason: "FailedJobs", message: `(?s)node 0 \(pod \S+\) failed \(exit code 1\)`,
			outputs: failedAs(trainjob.ClassCode, false, nil)},
		also: trainedOnceOnItsOwn,
	}, {
		name: "TheSameStepAgainIsServedFromTheCache",
		// The earlier run trained and stored its outputs; this one creates no TrainJob and
		// returns them. The reason and message outputs are the stored ones (byte for byte), so
		// only the face's own status says CacheHit: not compared here, as the CLI and Argo
		// faces report the outputs' reason.
		step: `
framework: torch
runtime: {name: ` + realstack.NoRetryRuntime + `, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 1
  env: {KWOK_TERMINATION_MESSAGE: '{"trainstep.dev/result": {"loss": 0.5, "model_uri": "s3://b/m"}}'}
  func: |
    def train():
        pass
cache: {maxAge: 1h, salt: conformance}
timeout: 3m
`,
		earlier: sameStep,
		want: want{phase: "Succeeded", outputs: map[string]string{trainjob.OutCacheHit: `^true$`, trainjob.OutCachedFrom: `^\S+$`,
			trainjob.OutCacheKey: `^[0-9a-f]{64}$`, "result-loss": `^0\.5$`, "result-model_uri": `^s3://b/m$`}},
		also: trainedOnce,
	}, {
		name: "AChangedStepIsACacheMiss",
		// The earlier run's function differs from this one's by one byte: its success is not
		// this step's, so this run trains and stores its own.
		step: `
framework: torch
runtime: {name: ` + realstack.NoRetryRuntime + `, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 1
  env: {KWOK_TERMINATION_MESSAGE: '{"trainstep.dev/result": {"loss": 0.5}}'}
  func: |
    def train():
        pass  # v2
cache: {maxAge: 1h, salt: conformance-miss}
timeout: 3m
`,
		earlier: func(doc string) string { return strings.Replace(doc, "# v2", "# v1", 1) },
		want: want{phase: "Succeeded", outputs: map[string]string{trainjob.OutCacheHit: `^false$`, trainjob.OutCachedFrom: `^$`,
			trainjob.OutCacheKey: `^[0-9a-f]{64}$`, "result-loss": `^0\.5$`}},
		also: trainedAndStored,
	}, {
		name: "InFlightStepsOfOneKeyTrainOnce",
		// Another run of the same step is training when this one starts: this one follows that
		// run's TrainJob instead of making a second, and ends with its outputs.
		step: `
framework: torch
runtime: {name: ` + realstack.NoRetryRuntime + `, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 1
  env:
    KWOK_RUN_SECONDS: "20"
    KWOK_TERMINATION_MESSAGE: '{"trainstep.dev/result": {"loss": 0.25}}'
  func: |
    def train():
        pass
cache: {maxAge: 1h, salt: conformance-in-flight}
timeout: 3m
`,
		earlier:   sameStep,
		alongside: true,
		want: want{phase: "Succeeded", waiting: `following TrainJob \S+: a step with the same cache key started it`,
			outputs: map[string]string{trainjob.OutCacheHit: `^true$`, trainjob.OutCachedFrom: `^\S+$`, "result-loss": `^0\.25$`}},
		also: trainedOnce,
		skip: map[string]string{"argo": inFlightArgo},
	}, {
		name: "follow+stop/StoppingOneOfTwoInFlightStepsLeavesTheOtherTraining",
		// This run follows the earlier run's TrainJob and is stopped: it lets go of the job, which
		// trains on and succeeds for the earlier run (the face checks it: alongside).
		step: `
framework: torch
runtime: {name: ` + realstack.NoRetryRuntime + `, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 1
  env: {KWOK_RUN_SECONDS: "30"}
  func: |
    def train():
        pass
cache: {maxAge: 1h, salt: conformance-in-flight-stop}
timeout: 3m
`,
		earlier:   sameStep,
		alongside: true,
		action: func(t *testing.T, r *running) {
			r.waitSaid(t, `following TrainJob`)
			r.stop(t)
		},
		want: want{jobs: &jobCount{made: 0, left: 0}, phase: stopped},
		also: func(t *testing.T, got result) {
			l := &trainer.TrainJobList{}
			require.NoError(t, stack.Client.List(t.Context(), l, client.InNamespace(got.step.ns)))
			assert.Len(t, l.Items, 1, "one TrainJob, trained for the earlier run")
		},
		skip: map[string]string{"argo": inFlightArgo},
	}, {
		name: "cache+engineRetry/AFailedRunIsNeverServed",
		// Every attempt 0 of this step fails (KWOK_FAIL_ATTEMPT). The earlier run had no retry and
		// failed: nothing was stored, so this run trains; its retry succeeds and is stored.
		step: `
framework: torch
runtime: {name: ` + realstack.NoRetryRuntime + `, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 1
  env:
    KWOK_FAIL_ATTEMPT: "0"
    KWOK_TERMINATION_MESSAGE: '{"trainstep.dev/result": {"loss": 0.75}}'
  func: |
    def train():
        pass
pod:
  volumes: [{name: ckpt, nfs: {server: nfs.example.com, path: /exports}}]
  volumeMounts: [{name: ckpt, mountPath: /ckpt}]
checkpoint: {volume: ckpt}
cache: {maxAge: 1h, salt: conformance-failed}
timeout: 3m
`,
		earlier: sameStep,
		retries: 1,
		want: want{jobs: &jobCount{made: 2, left: 2}, phase: "Succeeded", outputs: map[string]string{trainjob.OutCacheHit: `^false$`, trainjob.OutCachedFrom: `^$`,
			trainjob.OutAttempt: `^1$`, "result-loss": `^0\.75$`}},
		also:  trainedAndStored,
		lacks: lacksPodBlock,
	}, {
		name: "startTimeout+kueue/QueuedPastStartTimeoutThenAdmitted",
		// The queue's one GPU is held for 30 s by a job Kueue admitted first; startTimeout counts
		// from the step's admission, not its TrainJob's creation.
		queue: &queue{gpus: 1},
		setup: func(t *testing.T, r *running) { stack.KueueBlocker(t, r.ns, r.queue, 1, 30, "") },
		step:  queuedStep("startTimeout: 15s\n"),
		want: want{jobs: &jobCount{made: 1, left: 1}, phase: "Succeeded",
			outputs: map[string]string{trainjob.OutQueueWait: `^\d+$`, trainjob.OutPreemptions: `^0$`},
			waiting: `(?s) is queued in LocalQueue ` + queueName + ` \(Workload .*insufficient unused quota for nvidia\.com/gpu in flavor ` + realstack.KueueFlavor},
		also: queuedLongerThan(15),
	}, {
		name: "checkpoint+kueue/PreemptedThenRequeuedWhereItWas",
		// A high-priority job takes the queue's one GPU from the running low-priority step, which
		// names a checkpoint location: admitted again, it trains on where it was (also).
		queue: &queue{gpus: 1},
		step: queuedStep("labels: {"+realstack.KueuePriorityLabel+": "+realstack.KueueLowPriority+"}\n"+checkpointBlock,
			"KWOK_RUN_SECONDS: \"20\""),
		action: preemptOnceStarted,
		want: want{jobs: &jobCount{made: 1, left: 1}, phase: "Succeeded",
			outputs: map[string]string{trainjob.OutPreemptions: `^1$`, trainjob.OutEvictions: `^1$`, trainjob.OutAttempt: `^0$`},
			waiting: `(?s) was preempted by Kueue \(InClusterQueue\): .*; requeued in LocalQueue ` + queueName},
		also:  keptItsCheckpointLocation,
		lacks: lacksPodBlock,
	}, {
		name: "KueueEvictedByWaitForPodsReadyThenRequeued",
		// Its pods are held from Ready (realstack.HoldReadyEnv) until the second admission's.
		queue:  &queue{gpus: 1},
		step:   queuedStep("startTimeout: 1m\n", realstack.HoldReadyEnv+`: "1"`),
		action: releaseReadmitted,
		want: want{phase: "Succeeded",
			outputs: map[string]string{trainjob.OutPreemptions: `^0$`, trainjob.OutEvictions: `^1$`},
			waiting: ` was evicted by Kueue \(PodsReadyTimeout\): `},
	}, {
		name: "KueueDeactivatedWorkload",
		// Never Ready: evicted, requeued once (realstack.KueueRequeuingLimit), evicted again, and
		// deactivated; Kueue will not admit it again, so the step ends rather than wait.
		queue: &queue{gpus: 1},
		step:  queuedStep("", realstack.HoldReadyEnv+`: "1"`),
		want: want{phase: "Failed", reason: "DeactivatedDueToRequeuingLimitExceeded",
			message:  `(?s)Kueue deactivated its Workload.*exceeding the maximum number of re-queuing retries`,
			outputs:  failedAs(trainjob.ClassEvicted, true, nil),
			trainJob: gone},
		also: func(t *testing.T, got result) {
			assert.NotContains(t, got.message, "last lines of", "no pod's log explains a deactivation")
		},
	}, {
		name: "stop+kueue/StoppedWhileQueued",
		// A queue with no GPU quota never admits the step.
		queue:  &queue{gpus: 0},
		step:   queuedStep(""),
		action: stopOnceQueued,
		want:   want{jobs: &jobCount{made: 1, left: 0}, phase: stopped, trainJob: gone},
		also:   noWorkloadLeft,
	}}, pairScenarios()...)
}

// failingInitRuntime is a torch runtime whose dataset initializer is not retried
// (realstack.InstallInitializerRuntime): a failing one fails the job at once.
const failingInitRuntime = "torch-failing-init"

// failingStep is a one-node step whose node fails as kwok's stages/pod-fail.yaml makes it, with
// env (the trainer's, as `NAME: value` pairs) saying how.
func failingStep(env string) string {
	return `
framework: torch
runtime: {name: ` + realstack.NoRetryRuntime + `, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 1
  env: {KWOK_FAIL: "1", ` + env + `}
  func: |
    def train():
        pass
timeout: 3m
`
}

// failedAs is the outputs of a step that failed as class: its class, whether a retry can help,
// and more.
func failedAs(class trainjob.FailureClass, retryable bool, more map[string]string) map[string]string {
	out := map[string]string{trainjob.OutFailureClass: "^" + string(class) + "$", trainjob.OutRetryable: "^" + strconv.FormatBool(retryable) + "$"}
	maps.Copy(out, more)
	return out
}

// queuedStep is a one-node, one-GPU step in the scenario's queue, with extra (unindented) and
// env (the trainer's, as `NAME: "value"`) added.
func queuedStep(extra string, env ...string) string {
	return `
framework: torch
runtime: {name: torch-distributed, kind: ClusterTrainingRuntime}
queueName: ` + queueName + `
trainer:
  numNodes: 1
  resourcesPerNode: {gpu: 1}
  env: {` + strings.Join(env, ", ") + `}
  func: |
    def train():
        pass
timeout: 4m
` + extra
}

// TestConformance runs every scenario through every face, all at once (the Argo face's steps two
// at a time: argoSlots): each step has its own namespace (Argo: its own Workflow, agent and plugin
// sidecar), and none changes what the stack shares (the node log is realstack.NodeLog throughout).
// Each face's end is checked against the scenario's, logged as one OUTPUTS line, and compared with
// the other faces' once all have ended (byFace: the differential check).
func TestConformance(t *testing.T) {
	// Installed for the whole table: a subtest's cleanup must not delete it under another.
	stack.InstallNoRetryRuntime(t)
	stack.InstallQuotaRuntime(t)
	stack.InstallGPURuntime(t)
	stack.InstallInitializerRuntime(t, failingInitRuntime, trainjob.DatasetInitializerJob, ptr.To[int32](0),
		corev1.Container{Image: "ghcr.io/kubeflow/trainer/dataset-initializer"})
	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			// The differential check, once every face's subtest ended (Go runs a test's cleanups
			// after its parallel subtests, and theirs).
			var ended byFace
			t.Cleanup(func() { ended.compare(t) })
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
					ended.add(t, sc.name, f.name(), got)
					check(t, sc.want.in(got.step.queue), got)
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
	checkCost(t, got.outputs)
	if w.jobs != nil {
		checkJobs(t, *w.jobs, got)
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

// checkCost: a step that ended with a TrainJob says where its time went, in whole seconds that
// sum to duration-seconds, and its GPU-hours; one that has no duration (no TrainJob, or a face
// that did not read it) says nothing of it.
func checkCost(t *testing.T, outs map[string]string) {
	t.Helper()
	d, ok := outs[trainjob.OutDuration]
	if !ok || d == "" {
		for _, n := range trainjob.CostOutputNames {
			assert.Empty(t, outs[n], "output %s without a duration", n)
		}
		return
	}
	sum := 0
	for _, n := range []string{trainjob.OutQueueWait, trainjob.OutInitializing, trainjob.OutTraining} {
		if n == trainjob.OutQueueWait && outs[n] == "" {
			continue // never suspended
		}
		v, err := strconv.Atoi(outs[n])
		if assert.NoError(t, err, "output %s", n) {
			sum += v
		}
	}
	assert.Equal(t, d, strconv.Itoa(sum), "queue-wait, initializing and training seconds sum to duration-seconds: %v", outs)
	assert.Regexp(t, `^\d+$`, outs[trainjob.OutLost], "output %s", trainjob.OutLost)
	assert.Regexp(t, `^\d+(\.\d+)?$`, outs[trainjob.OutGPUHours], "output %s", trainjob.OutGPUHours)
}

// leftRunning: the step's TrainJob, which trainstep was refused to delete, is still there and not
// being deleted (deny's probe, in the same namespace, aside).
func leftRunning(t *testing.T, got result) {
	var left []trainer.TrainJob
	for _, tj := range got.step.trainJobs(t) {
		if !strings.HasPrefix(tj.Name, "probe-") {
			left = append(left, tj)
		}
	}
	require.Len(t, left, 1)
	assert.Nil(t, left[0].DeletionTimestamp)
	assert.False(t, trainjob.Kept(&left[0]), "not kept: it was to be deleted")
}

// evicted is the message of the eviction evictWhileCordoned makes, as the kubelet words one.
const evicted = "The node was low on resource: memory."

// evictWhileCordoned evicts node 0's pod once both of the step's nodes run, with the step's own
// Node cordoned, and uncordons it once the step said its replacement waits for a Node and the
// startTimeout (30 s) has passed.
func evictWhileCordoned(t *testing.T, r *running) {
	r.waitSaid(t, `is running: 2/2 nodes`)
	tj := r.started(t)
	pods := &corev1.PodList{}
	require.NoError(t, stack.Client.List(t.Context(), pods, client.InNamespace(r.ns), client.MatchingLabels{
		trainjob.LabelJobSetName: tj.Name, trainjob.LabelReplicatedJob: trainjob.NodeJob, trainjob.LabelCompletionIndex: "0"}))
	require.Len(t, pods.Items, 1)
	uncordon := stack.CordonNode(t, r.node)
	require.NoError(t, stack.Evict(t.Context(), r.ns, pods.Items[0].Name, evicted))
	r.waitSaid(t, `its replacement \(pod .*were unschedulable`)
	require.Eventually(t, func() bool { return time.Since(tj.CreationTimestamp.Time) > 32*time.Second }, timeout, interval,
		"the replacement must wait past the startTimeout")
	uncordon()
}

// startRecorded: the step's TrainJob is not deleted and carries the start record.
func startRecorded(t *testing.T, got result) {
	tjs := got.step.trainJobs(t)
	require.Len(t, tjs, 1, "the TrainJob is not deleted")
	_, err := time.Parse(time.RFC3339, tjs[0].Annotations[trainjob.AnnotationStartedAt])
	assert.NoError(t, err, "the start is recorded on the TrainJob: %v", tjs[0].Annotations)
}

// aloneOnItsNode: every pod on the step's own Node is the step's: another test's pod there
// would be stranded when the Node is deleted at this one's end (kwok plays no more of its stages
// and serves no more of its log), so the Node is tainted and only this step tolerates it.
func aloneOnItsNode(t *testing.T, got result) {
	node := &corev1.Node{}
	require.NoError(t, stack.Client.Get(t.Context(), client.ObjectKey{Name: got.step.node}, node))
	assert.Contains(t, node.Spec.Taints, corev1.Taint{Key: realstack.PrivateNodeLabel, Value: got.step.node, Effect: corev1.TaintEffectNoSchedule},
		"no pod that does not tolerate it goes there")
	pods := &corev1.PodList{}
	require.NoError(t, stack.Client.List(t.Context(), pods, client.MatchingFields{"spec.nodeName": got.step.node}))
	require.NotEmpty(t, pods.Items, "the step's pods ran on Node %s", got.step.node)
	for _, p := range pods.Items {
		assert.Equal(t, got.step.ns, p.Namespace, "pod %s/%s is on the step's own Node", p.Namespace, p.Name)
		assert.Equal(t, got.outputs[trainjob.OutName], p.Labels[trainjob.LabelJobSetName], "pod %s/%s is on the step's own Node", p.Namespace, p.Name)
	}
}

// lacksPodBlock: Trainer v2.0 refuses a step's pod block (it has no podTemplateOverrides).
func lacksPodBlock() string {
	if tr, _, err := realstack.Release(stack.Assets); err == nil && minorOf(tr) < 1 {
		return fmt.Sprintf("Trainer %s has no podTemplateOverrides, so a step cannot choose its pods' Node", tr)
	}
	return ""
}

// preemptOnceStarted admits a high-priority job to the step's queue once the step started: Kueue
// preempts the step for it.
func preemptOnceStarted(t *testing.T, r *running) {
	r.started(t)
	stack.KueueBlocker(t, r.ns, r.queue, 1, 10, realstack.KueueHighPriority)
}

// releaseReadmitted lets the step's held pods become Ready once Kueue has evicted it and admitted
// it again: those made since that admission.
func releaseReadmitted(t *testing.T, r *running) {
	require.Eventually(t, func() bool {
		tjs := r.trainJobs(t)
		if len(tjs) != 1 {
			return false
		}
		w, err := trainjob.FindWorkload(t.Context(), stack.Client, &tjs[0])
		// Admitted with no eviction on record: admitted again, not the first admission before
		// Kueue took it back (then its pods, made since AdmittedAt as well, are the old ones).
		return err == nil && w != nil && w.Evictions > 0 && w.Admitted && w.EvictedReason == "" &&
			stack.ReleaseHeldPods(t, r.ns, w.AdmittedAt) > 0
	}, timeout, interval, "Kueue must admit the step again")
}

// stopOnceQueued stops the step once Kueue made its TrainJob's Workload.
func stopOnceQueued(t *testing.T, r *running) {
	require.Eventually(t, func() bool {
		for _, tj := range r.trainJobs(t) {
			if w, err := trainjob.FindWorkload(t.Context(), stack.Client, &tj); err == nil && w != nil {
				r.job = tj.DeepCopy()
				return true
			}
		}
		return false
	}, timeout, interval, "Kueue must make the step's Workload")
	r.stop(t)
}

// noWorkloadLeft: the Workload of the TrainJob the action saw went with it, so Kueue admits
// nothing later.
func noWorkloadLeft(t *testing.T, got result) {
	require.NotNil(t, got.step.job)
	require.Eventually(t, func() bool {
		l := trainjob.NewWorkloadList()
		return stack.Client.List(t.Context(), l, client.InNamespace(got.step.ns),
			client.MatchingLabels{trainjob.LabelKueueJobUID: string(got.step.job.UID)}) == nil && len(l.Items) == 0
	}, timeout, interval, "the Workload must be gone")
}

// queuedLongerThan: the premise of a queued scenario, that the step waited in its queue longer
// than its startTimeout.
func queuedLongerThan(seconds int) func(t *testing.T, got result) {
	return func(t *testing.T, got result) {
		wait, err := strconv.Atoi(got.outputs[trainjob.OutQueueWait])
		require.NoError(t, err, "outputs: %v", got.outputs)
		assert.Greater(t, wait, seconds, "it waited in the queue longer than its startTimeout")
	}
}

// unschedulableStep asks for twice the GPUs any Node has, so its pod is never scheduled: it
// fails at its startTimeout.
func unschedulableStep(startTimeout string) string {
	return fmt.Sprintf(`
framework: torch
runtime: {name: torch-distributed, kind: ClusterTrainingRuntime}
trainer:
  numNodes: 1
  resourcesPerNode: {gpu: %d}
  func: |
    def train():
        pass
timeout: 5m
startTimeout: %s
`, realstack.NodeGPUs*2, startTimeout)
}

// gpuHoursAre: the step's gpu-hours is accelerators (per node × nodes) × its training time, to
// the output's three decimals; training-seconds is rounded to whole seconds, so they agree within
// half a second of accelerator time.
func gpuHoursAre(accelerators int) func(t *testing.T, got result) {
	return func(t *testing.T, got result) {
		training, err := strconv.Atoi(got.outputs[trainjob.OutTraining])
		require.NoError(t, err, "outputs: %v", got.outputs)
		hours, err := strconv.ParseFloat(got.outputs[trainjob.OutGPUHours], 64)
		require.NoError(t, err, "outputs: %v", got.outputs)
		want := float64(accelerators) * float64(training) / 3600
		assert.InDelta(t, want, hours, float64(accelerators)*0.5/3600+0.0005,
			"gpu-hours is %d accelerators × %d s of training", accelerators, training)
		assert.Positive(t, hours)
	}
}

// lostAtLeast: the step's lost-seconds counts at least seconds of its earlier attempts.
func lostAtLeast(seconds int) func(t *testing.T, got result) {
	return func(t *testing.T, got result) {
		lost, err := strconv.Atoi(got.outputs[trainjob.OutLost])
		require.NoError(t, err, "outputs: %v", got.outputs)
		assert.GreaterOrEqual(t, lost, seconds, "lost-seconds counts the earlier attempt: %v", got.outputs)
	}
}

// trainedTwice: each of the two attempts had a TrainJob of its own, and the step reports the
// last one's.
func trainedTwice(t *testing.T, got result) {
	var names []string
	for _, tj := range got.step.trainJobs(t) {
		names = append(names, tj.Name)
	}
	require.Len(t, names, 2, "one TrainJob per attempt")
	assert.Contains(t, names, got.outputs[trainjob.OutName])
}

// retriedByTrainstep: the step made its second TrainJob itself, stamped as the retry of the
// first, which it left as it failed (OOMKilled, for its logs); and it resumed where the first
// stopped.
func retriedByTrainstep(t *testing.T, got result) {
	resumedWhereTheFirstStopped(t, got)
	var first, second *trainer.TrainJob
	for _, tj := range got.step.trainJobs(t) {
		if tj.Name == got.outputs[trainjob.OutName] {
			second = &tj
		} else {
			first = &tj
		}
	}
	require.NotNil(t, first, "the failed TrainJob is kept")
	require.NotNil(t, second)
	assert.Equal(t, first.Name, second.Annotations["trainstep.dev/retry-of"])
	assert.True(t, trainjob.Observe(first, nil).Phase == trainjob.PhaseFailed, "the first failed: %v", first.Status.Conditions)
}

// noPodsQuota is the ResourceQuota quotaOfNoPods makes.
const noPodsQuota = "conformance-no-pods"

// quotaOfNoPods makes, in the step's namespace and until it ends, a ResourceQuota of no pods of
// the quota runtime's PriorityClass, once the resourcequota controller has counted it (until then
// admission refuses every pod it scopes with "status unknown for quota", another message).
func quotaOfNoPods(t *testing.T, r *running) {
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: noPodsQuota, Namespace: r.ns},
		Spec: corev1.ResourceQuotaSpec{
			Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")},
			ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{
				ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn,
				Values: []string{realstack.QuotaPriorityClass}}}},
		},
	}
	require.NoError(t, stack.Client.Create(t.Context(), quota))
	t.Cleanup(func() { _ = stack.Client.Delete(context.Background(), quota) })
	require.Eventually(t, func() bool {
		return stack.Client.Get(t.Context(), client.ObjectKeyFromObject(quota), quota) == nil && quota.Status.Hard != nil
	}, 2*time.Minute, 200*time.Millisecond, "the resourcequota controller must count quota %s", quota.Name)
}

// enforceRestricted labels the step's namespace for Pod Security Admission's restricted level.
func enforceRestricted(t *testing.T, r *running) {
	n := &corev1.Namespace{}
	require.NoError(t, stack.Client.Get(t.Context(), client.ObjectKey{Name: r.ns}, n))
	orig := n.DeepCopy()
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	require.NoError(t, stack.Client.Patch(t.Context(), n, client.MergeFrom(orig)))
}

// trainedOnceOnItsOwn: the step made one TrainJob, the one it names.
func trainedOnceOnItsOwn(t *testing.T, got result) {
	jobs := got.step.trainJobs(t)
	require.Len(t, jobs, 1, "no retry of a failure retrying cannot help")
	assert.Equal(t, got.outputs[trainjob.OutName], jobs[0].Name)
}

// trainedOnce: of the two runs of the step, only the first made a TrainJob, the one the hit
// names and the cache's entry holds. (Argo's first Workflow is deleted when its run ends, and
// its TrainJob with it.)
func trainedOnce(t *testing.T, got result) {
	key := got.outputs[trainjob.OutCacheKey]
	from := got.outputs[trainjob.OutCachedFrom]
	l := &trainer.TrainJobList{}
	require.NoError(t, stack.Client.List(t.Context(), l, client.InNamespace(got.step.ns),
		client.MatchingLabels{stepcache.LabelKey: stepcache.ShortKey(key)}))
	assert.LessOrEqual(t, len(l.Items), 1)
	for _, tj := range l.Items {
		assert.Equal(t, from, tj.Name, "the second run made no TrainJob")
	}
	entry, err := stepcache.Store{API: stack.Client}.Get(t.Context(), got.step.ns, key)
	require.NoError(t, err)
	require.NotNil(t, entry, "stored in %s/%s", got.step.ns, stepcache.ConfigMapName)
	assert.Equal(t, from, entry.TrainJob)
}

// inFlightArgo is why the Argo face runs no scenario of two runs at once.
const inFlightArgo = "the Argo face runs a scenario's earlier Workflow to its end before the checked one, and every Workflow shares " +
	"the one namespace its plugin watches, so it has no earlier run in flight beside it; " +
	"core/lifecycle's share_test.go proves the behaviour the Argo face shares, and the reaper's release is in plugin/argo's tests"

// sameStep is a scenario's earlier run of the very same step.
func sameStep(doc string) string { return doc }

// trainedAndStored: the step trained (a miss) and the cache's entry of its key is its own
// TrainJob's.
func trainedAndStored(t *testing.T, got result) {
	name := got.outputs[trainjob.OutName]
	require.NotEmpty(t, name, "outputs: %v", got.outputs)
	var mine []string
	for _, tj := range got.step.trainJobs(t) {
		mine = append(mine, tj.Name)
	}
	assert.Contains(t, mine, name, "the step made the TrainJob it reports")
	entry, err := stepcache.Store{API: stack.Client}.Get(t.Context(), got.step.ns, got.outputs[trainjob.OutCacheKey])
	require.NoError(t, err)
	require.NotNil(t, entry, "stored in %s/%s", got.step.ns, stepcache.ConfigMapName)
	assert.Equal(t, name, entry.TrainJob)
}

// checkpointBlock gives a step the checkpoint volume of the resume scenarios.
const checkpointBlock = `pod:
  volumes: [{name: ckpt, nfs: {server: nfs.example.com, path: /exports}}]
  volumeMounts: [{name: ckpt, mountPath: /ckpt}]
checkpoint: {volume: ckpt}
`

// keptItsCheckpointLocation: preempted and admitted again, the step kept its one TrainJob, and
// the pods of the second admission (the first's were deleted when Kueue suspended the job) have
// the checkpoint directory and attempt it had from the start: a preemption is no new attempt, so
// its training resumes from the same place.
func keptItsCheckpointLocation(t *testing.T, got result) {
	jobs := got.step.trainJobs(t)
	require.Len(t, jobs, 1, "a preemption makes no new TrainJob")
	env := envOf(jobs[0].Spec.Trainer.Env)
	dir := env[step.CheckpointDirEnv]
	assert.Regexp(t, `^/ckpt/checkpoints/[^/]+/[^/]+$`, dir, "the step's own directory on the volume")
	assert.Equal(t, "0", env[step.AttemptEnv])
	pods := &corev1.PodList{}
	require.NoError(t, stack.Client.List(t.Context(), pods, client.InNamespace(got.step.ns),
		client.MatchingLabels{trainjob.LabelJobSetName: jobs[0].Name}))
	require.NotEmpty(t, pods.Items)
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			if c.Name == trainjob.NodeContainer {
				assert.Equal(t, dir, envOf(c.Env)[step.CheckpointDirEnv], "pod %s", p.Name)
				assert.Equal(t, "0", envOf(c.Env)[step.AttemptEnv], "pod %s", p.Name)
				assert.Contains(t, c.VolumeMounts, corev1.VolumeMount{Name: "ckpt", MountPath: "/ckpt"}, "pod %s", p.Name)
			}
		}
	}
}

// resumedFrom is the checkpoint the retried step of ARetryResumesFromTheCheckpoint resumes from.
const resumedFrom = "/ckpt/checkpoints/run/step-40"

// resumedWhereTheFirstStopped: each attempt had a TrainJob of its own; both gave the trainer one
// checkpoint directory, the step's own on the volume, and each its attempt; and the pod the
// Trainer made for the second mounts the volume there.
func resumedWhereTheFirstStopped(t *testing.T, got result) {
	jobs := got.step.trainJobs(t)
	require.Len(t, jobs, 2, "one TrainJob per attempt")
	dirs, attempts := map[string]bool{}, map[string]bool{}
	for _, tj := range jobs {
		env := envOf(tj.Spec.Trainer.Env)
		dirs[env[step.CheckpointDirEnv]] = true
		attempts[env[step.AttemptEnv]] = true
	}
	require.Len(t, dirs, 1, "one checkpoint directory for both attempts: %v", dirs)
	for dir := range dirs {
		assert.Regexp(t, `^/ckpt/checkpoints/[^/]+/[^/]+$`, dir, "the step's own directory on the volume")
	}
	assert.Equal(t, map[string]bool{"0": true, "1": true}, attempts)

	pods := &corev1.PodList{}
	require.NoError(t, stack.Client.List(t.Context(), pods, client.InNamespace(got.step.ns),
		client.MatchingLabels{trainjob.LabelJobSetName: got.outputs[trainjob.OutName]}))
	require.NotEmpty(t, pods.Items)
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			if c.Name != trainjob.NodeContainer {
				continue
			}
			assert.Contains(t, c.VolumeMounts, corev1.VolumeMount{Name: "ckpt", MountPath: "/ckpt"}, "pod %s", p.Name)
			assert.Equal(t, "1", envOf(c.Env)[step.AttemptEnv], "pod %s", p.Name)
			assert.True(t, dirs[envOf(c.Env)[step.CheckpointDirEnv]], "pod %s", p.Name)
		}
	}
}

func envOf(env []corev1.EnvVar) map[string]string {
	m := map[string]string{}
	for _, e := range env {
		m[e.Name] = e.Value
	}
	return m
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
