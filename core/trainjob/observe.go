package trainjob

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/core/trainers"
)

// Pod labels JobSet sets; they find a TrainJob's pods.
const (
	LabelJobSetName      = "jobset.sigs.k8s.io/jobset-name"
	LabelReplicatedJob   = "jobset.sigs.k8s.io/replicatedjob-name"
	LabelCompletionIndex = "batch.kubernetes.io/job-completion-index"
	NodeJob              = "node"
	LauncherJob          = "launcher"
	NodeContainer        = "node"
)

// Phase is where a step is. Pending, Suspended and Running are not terminal.
type Phase string

// Phases, as faces report them.
const (
	PhasePending   Phase = "Pending"
	PhaseSuspended Phase = "Suspended"
	PhaseRunning   Phase = "Running"
	PhaseSucceeded Phase = "Succeeded"
	PhaseFailed    Phase = "Failed"
	PhaseTimedOut  Phase = "TimedOut"
)

// Terminal reports whether nothing more will happen.
func (p Phase) Terminal() bool {
	return p == PhaseSucceeded || p == PhaseFailed || p == PhaseTimedOut
}

// Observation is a TrainJob as a step sees it: plain values every face renders its own way.
type Observation struct {
	Name      string
	Namespace string
	Runtime   string
	Framework string
	Phase     Phase
	Reason    string
	Message   string
	// LogTail is the end of the failing node's log, when pods exist and a log source answered.
	LogTail        string
	StartTime      *time.Time
	CompletionTime *time.Time
	NumNodes       int32
	RunningNodes   int32
	// Node0Pod is the first trainer pod once it runs (for log streaming).
	Node0Pod string
	// FailedPod is the pod whose log explains a failure, and FailedContainer its container whose
	// log that is (the node container, or an initializer's own).
	FailedPod, FailedContainer string
	// failedWhy says how FailedPod ended, in its own words (describeFailure), when it failed,
	// and failedBy its class (podFailure).
	failedWhy string
	failedBy  *Failure
	// Failure is why a failed or timed-out step failed, and whether a retry can help (failure.go).
	Failure *Failure
	// Progress and Metrics come from status.trainerStatus (Trainer v2.2+, when enabled).
	Progress  *int32
	Remaining *int32
	Metrics   map[string]string
	// MetricOrder is the metrics' names in the order the trainer reported them.
	MetricOrder []string
	// ProgressOff says the node pods show the Trainer's TrainJobStatus gate off (progress.go).
	ProgressOff bool
	// Result is the training function's return value on rank 0, as JSON, read from the trainer
	// container's termination message (empty when it returned None or has not returned).
	Result string
	// Started says the pods show, now, that the job has started (see AnnotationStartedAt): an
	// initializer pod runs or ran, or every trainer node runs or ran.
	Started bool
	// QueueWait, Preemptions, Evictions and ClusterQueue are what Kueue did (queue.go).
	QueueWait              *time.Duration
	Preemptions, Evictions int
	ClusterQueue           string
	// Remote says a worker cluster runs the job (MultiKueue, multikueue.go): Cluster names it
	// (when known) and Undelivered what stays on its pods.
	Remote      bool
	Cluster     string
	Undelivered string
	// Attempt is the retry attempt, when the face knows it or a resumed job's label says it
	// (nil: the resume outputs are left out); ResumedFrom is the checkpoint the command script
	// offered the function (resume.go): its path from the termination message, or, while the
	// job runs, its name from the progress rank 0 reported (trainers.ResumedFromMetric).
	Attempt     *int
	ResumedFrom string
	// CacheKey is the step's cache key, when it has a cache block (cached.go); Cached, when
	// set, is the stored success it was served from instead of training.
	CacheKey string
	Cached   *Cached
	// TrainingStart is when a trainer container of this run first started, Accelerators how
	// many accelerators one node asks for (cost.go), and Lost, set by the lifecycle once the
	// step ends, the time earlier attempts of the step spent before this one's TrainJob.
	TrainingStart *time.Time
	Accelerators  int64
	Lost          *time.Duration
}

// TrainerPods selects the pods that run the trainer: node, and launcher for MPI runtimes.
func TrainerPods(pods []corev1.Pod, jobName string) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if p.Labels[LabelJobSetName] != jobName {
			continue
		}
		if rj := p.Labels[LabelReplicatedJob]; rj == NodeJob || rj == LauncherJob {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return podOrder(out[i]) < podOrder(out[j]) })
	return out
}

// podOrder puts the launcher first (the SDK's node-0 on MPI runtimes), then nodes by index.
func podOrder(p corev1.Pod) int {
	idx, _ := strconv.Atoi(p.Labels[LabelCompletionIndex])
	if p.Labels[LabelReplicatedJob] == LauncherJob {
		return -1
	}
	return idx
}

// initializers names the initializer replicated jobs with a pod running now and those with one
// that succeeded (and none running), dataset before model.
func initializers(pods []corev1.Pod, jobName string) (running, done []string) {
	for _, rj := range []string{DatasetInitializerJob, ModelInitializerJob} {
		var run, ok bool
		for _, p := range pods {
			if p.Labels[LabelJobSetName] != jobName || p.Labels[LabelReplicatedJob] != rj {
				continue
			}
			run = run || p.Status.Phase == corev1.PodRunning
			ok = ok || p.Status.Phase == corev1.PodSucceeded
		}
		switch {
		case run:
			running = append(running, rj)
		case ok:
			done = append(done, rj)
		}
	}
	return running, done
}

// blame is the pod whose log and class explain a failure: the failed trainer pod whose failure
// came first (firstFailure: by when, not by node index, since the other nodes fail on losing it);
// else the first failed initializer (a job whose initializer failed never ran its nodes); else
// the first trainer pod. Nil when there is none.
func blame(pods []corev1.Pod, jobName string) (pod *corev1.Pod) {
	trainerPods := TrainerPods(pods, jobName)
	var failed []*corev1.Pod
	for i := range trainerPods {
		if trainerPods[i].Status.Phase == corev1.PodFailed {
			failed = append(failed, &trainerPods[i])
		}
	}
	if p := firstFailure(failed); p != nil {
		return p
	}
	for i := range pods {
		p := &pods[i]
		if p.Labels[LabelJobSetName] == jobName && isInitializer(p) && p.Status.Phase == corev1.PodFailed {
			return p
		}
	}
	if len(trainerPods) > 0 {
		return &trainerPods[0]
	}
	return nil
}

func isInitializer(p *corev1.Pod) bool {
	rj := p.Labels[LabelReplicatedJob]
	return rj == DatasetInitializerJob || rj == ModelInitializerJob
}

// logContainer is the container of p whose log explains its failure: the first that ended with
// an error, else the trainer's node container when p has one, else its first.
func logContainer(p *corev1.Pod) string {
	for _, cs := range containerStatuses(p) {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return cs.Name
		}
	}
	names := make([]string, 0, len(p.Spec.Containers)+len(p.Status.ContainerStatuses))
	for _, c := range p.Spec.Containers {
		names = append(names, c.Name)
	}
	for _, cs := range p.Status.ContainerStatuses {
		names = append(names, cs.Name)
	}
	if len(names) == 0 || slices.Contains(names, NodeContainer) {
		return NodeContainer
	}
	return names[0]
}

// readTrainerStatus takes the progress the trainer reported: progress, time left, its metrics in
// the order reported, and the checkpoint it resumed from. That and report()'s count are
// trainstep's (trainers.OwnMetricPrefix), no metrics of the function's.
func (o *Observation) readTrainerStatus(ts *trainer.TrainerStatus) {
	o.Progress, o.Remaining = ts.ProgressPercentage, ts.EstimatedRemainingSeconds
	for _, m := range ts.Metrics {
		if m.Name == trainers.ResumedFromMetric {
			o.ResumedFrom = m.Value // its name, until the termination message names its path
		}
		if strings.HasPrefix(m.Name, trainers.OwnMetricPrefix) {
			continue
		}
		if o.Metrics == nil {
			o.Metrics = map[string]string{}
		}
		if _, dup := o.Metrics[m.Name]; !dup {
			o.MetricOrder = append(o.MetricOrder, m.Name)
		}
		o.Metrics[m.Name] = m.Value
	}
}

// Observe reads a TrainJob and its pods, the one place conditions are interpreted. Terminal is
// Complete=True or Failed=True, found by type (never by position: Kueue's Suspended comes first).
// There is no Running condition: Running is all trainer pods running or done, computed whatever
// a Suspended=False/Resumed condition says (the SDK's bug #803), or a job that has started (an
// initializer runs, or the TrainJob carries AnnotationStartedAt) and is not suspended.
func Observe(tj *trainer.TrainJob, pods []corev1.Pod) Observation {
	o := Observation{
		Name:      tj.Name,
		Namespace: tj.Namespace,
		Runtime:   tj.Spec.RuntimeRef.Name,
		Framework: tj.Labels[LabelFramework],
		NumNodes:  numNodes(tj),
	}
	if !tj.CreationTimestamp.IsZero() {
		t := tj.CreationTimestamp.Time
		o.StartTime = &t
	}
	if ts := tj.Status.TrainerStatus; ts != nil {
		o.readTrainerStatus(ts)
	}
	trainerPods := TrainerPods(pods, tj.Name)
	o.ProgressOff = progressOff(tj, trainerPods)
	o.TrainingStart, o.Accelerators = trainingStart(trainerPods), accelerators(tj)
	for _, p := range trainerPods {
		if p.DeletionTimestamp != nil {
			continue // going away (a preempted or suspended job's pods): its replacement counts
		}
		if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded {
			o.RunningNodes++
			if o.Node0Pod == "" && p.Status.Phase == corev1.PodRunning {
				o.Node0Pod = p.Name
			}
		}
	}
	if p := blame(pods, tj.Name); p != nil {
		o.FailedPod, o.FailedContainer = p.Name, logContainer(p)
		if p.Status.Phase == corev1.PodFailed {
			o.failedWhy, o.failedBy = describeFailure(p), podFailure(p)
		}
	}
	result := podResult(trainerPods)
	o.Result = result.Value
	if result.ResumedFrom != "" {
		o.ResumedFrom = result.ResumedFrom
	}
	if o.ResumedFrom != "" {
		// Only a step with a checkpoint resumes, and its TrainJob carries the attempt it ran as:
		// the running message says "resumed from step 400 (attempt 2)" from the job alone.
		if a, err := strconv.Atoi(tj.Labels[LabelAttempt]); err == nil {
			o.Attempt = &a
		}
	}
	initRunning, initDone := initializers(pods, tj.Name)
	allRunning := o.NumNodes > 0 && o.RunningNodes >= o.NumNodes
	o.Started = allRunning || len(initRunning) > 0 || len(initDone) > 0
	conds := tj.Status.Conditions
	if c := apimeta.FindStatusCondition(conds, trainer.TrainJobFailed); c != nil && c.Status == metav1.ConditionTrue {
		return o.terminal(PhaseFailed, c)
	}
	if c := apimeta.FindStatusCondition(conds, trainer.TrainJobComplete); c != nil && c.Status == metav1.ConditionTrue {
		return o.terminal(PhaseSucceeded, c).WithResult(result)
	}
	if c := apimeta.FindStatusCondition(conds, trainer.TrainJobSuspended); (c != nil && c.Status == metav1.ConditionTrue) || (tj.Spec.Suspend != nil && *tj.Spec.Suspend) {
		o.Phase, o.Reason = PhaseSuspended, trainer.TrainJobSuspendedReason
		o.Message = fmt.Sprintf("TrainJob %s is suspended (held by a queue such as Kueue, or spec.suspend)", tj.Name)
		if c != nil && c.Message != "" {
			o.Message += ": " + c.Message
		}
		return o
	}
	return o.underway(tj, allRunning, initRunning, initDone)
}

// underway is a job that is neither finished nor suspended: Running when every trainer node runs
// (with the Trainer's progress), or when it has started (Started, or AnnotationStartedAt) and a
// node is being replaced or initializers run; else Pending, not yet started.
func (o Observation) underway(tj *trainer.TrainJob, allRunning bool, initRunning, initDone []string) Observation {
	if allRunning {
		o.Phase, o.Reason = PhaseRunning, "Running"
		o.Message = o.RunningMessage()
		return o
	}
	// Once started, a job stays Running while a replaced node comes back: the pods say only
	// that one is pending now; the annotation says the job ran (Decide reports the replacement).
	if o.Started || !StartedAt(tj).IsZero() {
		o.Phase, o.Reason = PhaseRunning, "Running"
		o.Message = fmt.Sprintf("TrainJob %s is running: %d/%d nodes", tj.Name, o.RunningNodes, o.NumNodes)
		if len(initRunning) > 0 {
			o.Message = fmt.Sprintf("TrainJob %s is initializing: %s running", tj.Name, strings.Join(initRunning, ", "))
			if len(initDone) > 0 {
				o.Message += fmt.Sprintf(" (%s done)", strings.Join(initDone, ", "))
			}
		}
		return o
	}
	o.Phase, o.Reason = PhasePending, "Pending"
	o.Message = fmt.Sprintf("TrainJob %s is starting: %d/%d nodes running", tj.Name, o.RunningNodes, o.NumNodes)
	return o
}

// ProgressFraction is Argo's node progress, "N/M": the Trainer's progressPercentage as P/100 when
// it reports one (v2.2+ with the TrainJobStatus gate), else running nodes / nodes; empty when
// the node count is unknown.
func (o Observation) ProgressFraction() string {
	if p := o.Progress; p != nil {
		return fmt.Sprintf("%d/100", min(max(*p, 0), 100))
	}
	if o.NumNodes <= 0 {
		return ""
	}
	running := min(o.RunningNodes, o.NumNodes)
	if o.Phase == PhaseSucceeded {
		running = o.NumNodes
	}
	return fmt.Sprintf("%d/%d", running, o.NumNodes)
}

func (o Observation) terminal(phase Phase, c *metav1.Condition) Observation {
	o.Phase, o.Reason, o.Message = phase, c.Reason, c.Message
	t := c.LastTransitionTime.Time
	o.CompletionTime = &t
	if o.Message == "" {
		o.Message = fmt.Sprintf("TrainJob %s %s", o.Name, strings.ToLower(string(phase)))
	}
	if phase == PhaseFailed {
		if o.failedWhy != "" {
			o.Message += "; " + o.failedWhy
		}
		// The Trainer's own reason where it names the cause (its deadline), else the failed pod's,
		// else the Job JobSet names (no pods: a MultiKueue manager's job, or gone).
		switch o.Failure = ReasonFailure(c.Reason); {
		case o.Failure != nil:
		case o.failedBy != nil:
			o.Failure = o.failedBy
		default:
			if o.Failure = jobSetFailure(o.Name, c); o.Failure == nil {
				o.Failure = Classified(ClassUnknown) // the pods are gone, or say nothing
			}
		}
	}
	if note := o.metricCollisions(); note != "" {
		o.Message += "; " + note
	}
	return o
}

func numNodes(tj *trainer.TrainJob) int32 {
	if tj.Spec.Trainer != nil && tj.Spec.Trainer.NumNodes != nil {
		return *tj.Spec.Trainer.NumNodes
	}
	if n, err := strconv.Atoi(tj.Labels[LabelNumNodes]); err == nil {
		return int32(n)
	}
	return 1
}

// ReasonResourcesCreationFailed is the Event the Trainer emits when it cannot create a job's
// JobSet; no condition records it (trainer#2459), so a waiter would otherwise see Pending forever.
const ReasonResourcesCreationFailed = "TrainJobResourcesCreationFailed"

// WithEvents surfaces the newest resource-creation failure in a not-yet-running job's message:
// the Trainer's Event about this TrainJob (its UID, where the Event names one; last seen after
// its creation: an Event of a deleted TrainJob of the same name is not this one's), while
// nothing shows the failure healed: once JobSet has the TrainJob's JobSet (the Trainer mirrors
// its Jobs in status.jobsStatus; its pods exist), the Trainer created its resources, however
// they failed before.
func (o Observation) WithEvents(tj *trainer.TrainJob, pods []corev1.Pod, events []corev1.Event) Observation {
	if o.Phase != PhasePending || resourcesCreated(tj, pods) {
		return o
	}
	notBefore := tj.CreationTimestamp.Add(-eventSlack)
	var newest *corev1.Event
	for i := range events {
		e := &events[i]
		if e.Reason != ReasonResourcesCreationFailed || e.InvolvedObject.Kind != trainer.TrainJobKind || e.InvolvedObject.Name != tj.Name ||
			(e.InvolvedObject.UID != "" && tj.UID != "" && e.InvolvedObject.UID != tj.UID) || lastSeen(e).Before(notBefore) {
			continue
		}
		if newest == nil || lastSeen(e).After(lastSeen(newest)) {
			newest = e
		}
	}
	if newest != nil {
		o.Reason = ReasonResourcesCreationFailed
		o.Message += "; the Trainer cannot create its resources: " + newest.Message
	}
	return o
}

// resourcesCreated reports whether the TrainJob's JobSet exists, as far as the TrainJob and its
// pods show: the Trainer mirrors the JobSet's Jobs in status.jobsStatus, and JobSet's Jobs make
// the pods.
func resourcesCreated(tj *trainer.TrainJob, pods []corev1.Pod) bool {
	if len(tj.Status.JobsStatus) > 0 {
		return true
	}
	for i := range pods {
		if pods[i].Labels[LabelJobSetName] == tj.Name {
			return true
		}
	}
	return false
}

// WithLogTail adds a failing pod's last log lines, bounded by BoundTail, to the message: of its
// container (the node container unless named otherwise: an initializer's own).
func (o Observation) WithLogTail(pod, container, tail string) Observation {
	tail = BoundTail(tail)
	if tail == "" {
		return o
	}
	o.LogTail = tail
	o.FailedPod, o.FailedContainer = pod, container
	of := pod
	if container != "" && container != NodeContainer {
		of = fmt.Sprintf("%s (container %s)", pod, container)
	}
	o.Message = fmt.Sprintf("%s\nlast lines of %s:\n%s", o.Message, of, tail)
	return o
}
