package trainjob

import (
	"context"
	"fmt"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/step"
)

// This file is the one follow policy: how every face (the CLI's Waiter, the Argo plugin, the
// Tekton reconciler) turns what it has read of a TrainJob into what the step reports and does.
// The faces differ only in how they read (a watch, a cache, a held call) and how they answer.

// Reasons the policy gives when a deadline, not the Trainer, ends a step.
const (
	ReasonTimeout      = "Timeout"
	ReasonStartTimeout = "StartTimeout"
)

// Deadlines bound a step. Both count from Since, else from the TrainJob's creation, so a
// restarted face keeps the deadline it had; StartTimeout counts from the last resume when that
// is later (a queue's admission: see startFrom).
type Deadlines struct {
	// Timeout bounds the whole step; 0 is none.
	Timeout time.Duration
	// StartTimeout fails a step whose TrainJob has not started by then (a pod that cannot be
	// scheduled or pulled, nodes that keep failing), with the cause; 0 is none. Started is one
	// initializer pod Running or Succeeded, or every trainer node at once (Observation.Started);
	// once started (AnnotationStartedAt), it never applies again.
	StartTimeout time.Duration
	// HangTimeout fails a running step whose reported progress has not moved for this long
	// (hang.go); 0 is none.
	HangTimeout time.Duration
	// KeepOnTimeout leaves the TrainJob in place when Timeout passes.
	KeepOnTimeout bool
	// Since is when the deadlines start; zero means the TrainJob's creation.
	Since time.Time
	// StartSince, when later than Since, is when StartTimeout starts: a step's own retry
	// (lifecycle's retry.go) bounds the whole step from its first TrainJob and each TrainJob's
	// start from that job's creation.
	StartSince time.Time
}

// StepDeadlines are the bounds a step asks for, counted from its TrainJob's creation: a face
// that counts from elsewhere (a Tekton attempt's start) or bounds the step itself (Argo's
// template timeout) sets Since and Timeout.
func StepDeadlines(spec *step.Spec) Deadlines {
	return Deadlines{Timeout: orNone(spec.Timeout), StartTimeout: orNone(spec.StartTimeout), HangTimeout: orNone(spec.HangTimeout),
		KeepOnTimeout: spec.KeepOnTimeout}
}

// orNone is a step's duration, 0 (none) when the step leaves it out.
func orNone(d *step.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.Duration
}

// Snapshot is what a face has read of one TrainJob, from a watch, a cache or the apiserver.
type Snapshot struct {
	TrainJob *trainer.TrainJob
	// Pods are the TrainJob's JobSet pods (label jobset.sigs.k8s.io/jobset-name); extra pods are
	// ignored.
	Pods []corev1.Pod
	// Events are Warning Events about the TrainJob and what it owns (its JobSet, Jobs and pods);
	// others are ignored.
	Events []corev1.Event
	// Workload is Kueue's Workload of a queued TrainJob (queue.go), nil when there is none.
	Workload *Workload
	Now      time.Time
}

// Verdict is what the policy makes of a snapshot.
type Verdict struct {
	Observation
	// Delete says the face must delete the TrainJob: a deadline passed and it may still run.
	Delete bool
	// Keep says the face must mark the TrainJob kept (Keep): the timeout passed, it may still
	// run, and the step asked for it to stay (keepOnTimeout) until its user deletes it.
	Keep bool
	// TailPod is the pod whose log tail belongs in the message: the failing node (or
	// initializer) of a failed job, or the newest failure of one its Job is retrying; and
	// TailContainer the container to read (the node container, or an initializer's own).
	TailPod, TailContainer string
	// NoTail says no pod's log explains the failure (Kueue deactivated the Workload: its pods
	// never ran, or ran fine and were stopped), so none is looked for.
	NoTail bool
	// refused is a Job's FailedCreate and missing a pod's FailedMount of a Secret or ConfigMap
	// that is not there, as the Events showed them (withOwnedTrouble), for a startTimeout's
	// failure class.
	refused, missing string
	// Wake is when to look again though nothing changed: the next deadline. Zero is never.
	Wake time.Time
	// Trouble says the message names why a job that is not running is not (a pod that cannot
	// be scheduled, a node its Job is retrying): news a face should pass on at once.
	Trouble bool
	// MarkStarted, when set, says the job has started and is not yet recorded so: the face
	// records it with MarkStarted(ctx, c, namespace, name, MarkStarted), once; a failure is
	// logged and asked again at the next look.
	MarkStarted time.Time
}

// Decide applies the policy to one snapshot. It is pure: the faces do the reading, the log
// tail (Tailer) and the delete. The outcome is read before any deadline is checked, so a
// TrainJob that finished before its deadline is reported as it finished, however late the face
// looks (a queue backlog, a restart, a leader change).
func Decide(s Snapshot, d Deadlines) Verdict {
	tj := s.TrainJob
	obs := Observe(tj, s.Pods).WithEvents(tj, s.Pods, s.Events).WithWorkload(tj, s.Workload)
	since := d.Since
	if since.IsZero() {
		since = tj.CreationTimestamp.Time
	}
	var timeout, start time.Time
	if d.Timeout > 0 {
		timeout = since.Add(d.Timeout)
	}
	startSince := since
	if d.StartSince.After(startSince) {
		startSince = d.StartSince
	}
	if from, ok := startFrom(tj, startSince, s.Workload); ok && d.StartTimeout > 0 {
		start = from.Add(d.StartTimeout)
	}
	v := Verdict{Observation: obs}
	v.Trouble = evictedByKueue(obs) // news: it may be admitted again in a second

	if obs.Phase.Terminal() {
		return ended(v, s.Now, timeout, d.Timeout)
	}
	if w := s.Workload; w != nil && w.Inactive && obs.Phase == PhaseSuspended {
		return deactivated(v, s.Now, w)
	}
	if !timeout.IsZero() && !s.Now.Before(timeout) {
		v.Observation = timedOut(obs, s.Now, fmt.Sprintf("TrainJob %s did not finish within %s", tj.Name, d.Timeout))
		v.Delete, v.Keep = !d.KeepOnTimeout, d.KeepOnTimeout
		if d.KeepOnTimeout {
			v.Message += fmt.Sprintf("; it was kept (keepOnTimeout) and may still be running: it stays until you delete it (kubectl delete trainjob %s)", tj.Name)
		}
		return v
	}
	hang := hangAt(tj, obs, d.HangTimeout)
	if !hang.IsZero() && !s.Now.Before(hang) {
		return hung(v, tj, s.Now, d.HangTimeout)
	}
	if d.HangTimeout > 0 && obs.ProgressOff {
		v.addNote(HangOffNote) // said where it matters: the gate's note is in the message already
	}
	v = waiting(v, s, start, timeout, d.StartTimeout)
	if !hang.IsZero() && (v.Wake.IsZero() || hang.Before(v.Wake)) {
		v.Wake = hang
	}
	return v
}

// waiting is the verdict on a job that has not finished and is within its timeout: why it is not
// (fully) running, from its Events and pods; the start to record; and startTimeout, which bounds
// only the time until the job first starts.
func waiting(v Verdict, s Snapshot, start, timeout time.Time, startTimeout time.Duration) Verdict {
	tj, obs := s.TrainJob, v.Observation
	trouble := podTrouble(s.Pods, tj.Name)
	// What the JobSet, the Jobs and the pods' Events say (events.go); an invalid Job ends the step.
	// A started job with a node missing (replaced, or still behind its initializers) reads them
	// too: its replacement may be refused or unable to mount its volumes.
	missing := obs.Phase == PhaseRunning && obs.RunningNodes < obs.NumNodes
	if (obs.Phase != PhaseRunning || missing) && withOwnedTrouble(&v, s) {
		return v
	}
	// A started job is Running while a node is replaced (Observe): its trouble is news too.
	if len(trouble.Lines) > 0 && (obs.Phase != PhaseRunning || missing || trouble.Restarted) {
		v.addNote(strings.Join(trouble.Lines, "; "))
		v.TailPod, v.TailContainer = trouble.Retrying, trouble.RetryingContainer
		v.Trouble = true
	}
	if obs.Started && StartedAt(tj).IsZero() {
		v.MarkStarted = s.Now
	}
	// Pending is a job that never started: startTimeout bounds only the time until it first does.
	// A Suspended job is held on purpose (Kueue, spec.suspend): it is not failing to start.
	if !start.IsZero() && obs.Phase == PhasePending {
		if !s.Now.Before(start) {
			v.Phase, v.Reason = PhaseFailed, ReasonStartTimeout
			v.Failure = stuckFailure(s.Pods, tj.Name, v.refused, v.missing) // a Pending job's Events were read above
			v.Message = fmt.Sprintf("TrainJob %s did not start within %s (startTimeout); it was deleted. %s", tj.Name, startTimeout, v.Message)
			now := s.Now
			v.CompletionTime = &now
			v.Delete = true
			return v
		}
		v.Wake = start
	}
	if !timeout.IsZero() && (v.Wake.IsZero() || timeout.Before(v.Wake)) {
		v.Wake = timeout
	}
	return v
}

// ended is the verdict on a finished job: as it finished, or timed out when that was after the
// step's deadline (nothing is left to stop then).
func ended(v Verdict, now, deadline time.Time, timeout time.Duration) Verdict {
	obs := v.Observation
	if obs.Phase == PhaseFailed {
		v.TailPod, v.TailContainer = obs.FailedPod, obs.FailedContainer
	}
	if !deadline.IsZero() && obs.CompletionTime != nil && obs.CompletionTime.After(deadline) {
		v.Observation = timedOut(obs, now, fmt.Sprintf("TrainJob %s finished at %s, after the step's timeout of %s",
			obs.Name, obs.CompletionTime.UTC().Format(time.RFC3339), timeout))
		v.TailPod, v.TailContainer = "", ""
	}
	return v
}

func timedOut(obs Observation, now time.Time, msg string) Observation {
	obs.Phase, obs.Reason, obs.Message = PhaseTimedOut, ReasonTimeout, msg
	obs.Failure = Classified(ClassTimeout)
	obs.CompletionTime = &now
	obs.LogTail, obs.FailedPod, obs.FailedContainer = "", "", ""
	return obs
}

// ConcludeKeep marks the TrainJob of a verdict that asks for it kept (v.Keep), once; kept says
// it is marked. A refusal no retry fixes is said in the message (kept false, no error); another
// failure is the error, and the face looks again.
func ConcludeKeep(ctx context.Context, c client.Writer, v Verdict) (obs Observation, kept bool, err error) {
	if !v.Keep {
		return v.Observation, false, nil
	}
	return keepVerdict(ctx, c, v.Observation, keptWhy(v))
}

// keptWhy is the value of AnnotationKept: when the timeout kept the job.
func keptWhy(v Verdict) string {
	if v.CompletionTime == nil {
		return "the step's timeout passed; keepOnTimeout"
	}
	return fmt.Sprintf("the step's timeout passed at %s; keepOnTimeout", v.CompletionTime.UTC().Format(time.RFC3339))
}

// Tailer adds a pod's log tail to a verdict's message: the part of following that reads logs.
type Tailer struct {
	Logs LogSource
	// Pods lists a TrainJob's pods from the apiserver when the snapshot had none to blame: the
	// pod watch may trail the TrainJob's.
	Pods client.Reader
}

// WithTail returns the verdict's observation with the tail of v.TailPod's container (or, for a
// failure with no pod known, of the pod blame picks among the TrainJob's pods) in its message.
func (t Tailer) WithTail(ctx context.Context, v Verdict) Observation {
	obs := v.Observation
	pod, container := v.TailPod, v.TailContainer
	if t.Logs == nil || v.NoTail || (pod == "" && obs.Phase != PhaseFailed) {
		return obs
	}
	if obs.Remote {
		obs.Message += "\n(no log tail: the pods ran on the worker cluster; MultiKueue mirrors only the TrainJob's status)"
		return obs
	}
	if pod == "" && t.Pods != nil {
		pods := &corev1.PodList{}
		if err := t.Pods.List(ctx, pods, client.InNamespace(obs.Namespace), client.MatchingLabels{LabelJobSetName: obs.Name}); err == nil {
			if p := blame(pods.Items, obs.Name); p != nil {
				pod, container = p.Name, logContainer(p)
			}
		}
	}
	if pod == "" {
		obs.Message += "\n(no log tail: the TrainJob has no trainer or failed initializer pods)"
		return obs
	}
	if container == "" {
		container = NodeContainer
	}
	tail, err := t.Logs.Tail(ctx, obs.Namespace, pod, container, TailLines)
	switch {
	case err != nil:
		obs.Message += fmt.Sprintf("\n(no log tail: %v)", err)
		return obs
	case strings.TrimSpace(tail) == "":
		obs.Message += fmt.Sprintf("\n(no log tail: pod %s printed nothing)", pod)
		return obs
	}
	return obs.WithLogTail(pod, container, tail)
}
