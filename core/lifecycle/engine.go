// Package lifecycle is the one life of a training step, whichever face runs it. Given the step,
// its identity and what the cluster shows now, the engine does the one next thing (plan and
// submit, adopt, record the start, delete or keep at a deadline, finish with the outputs, stop)
// and says where the step stands and when to look again. It makes every decision and every
// write to the cluster; a face only translates: how the step arrives (flags and a file, Argo's
// request, a CustomRun), how its status goes out (exit code and files, a node result, CustomRun
// status), and when to look (a loop on a watch, a held call, a reconcile).
//
// The engine is level-triggered: a look depends only on the step and the cluster, never on an
// earlier look, so a face may look as often as it likes, from any replica, after any restart.
// Whatever a face must remember between looks is in Step (Recorded), and the face keeps it
// where its engine keeps state (the Workflow's node outputs, the CustomRun's status, a
// variable of the one process).
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainjob"
)

// Step is one attempt of a training step, as its face received it.
type Step struct {
	// Spec is the step, parsed; Namespace where its TrainJob lives.
	Spec      *step.Spec
	Namespace string
	// Identity names the TrainJob of this attempt and tells it from anyone else's.
	Identity trainjob.Identity
	// Deadlines are the attempt's timeout and startTimeout, counted from Deadlines.Since.
	Deadlines trainjob.Deadlines
	// Begun is when the face began this attempt, where it keeps no better record (`executor
	// run`: its process's start): with Deadlines.Since zero, the timeout counts from it while
	// the step has no TrainJob of its own (a create that keeps failing), and so do the
	// deadlines of a job it only follows (share.go), which another step created earlier.
	Begun time.Time
	// FirstSince is when the step's first attempt began, as the face knows it (Argo: the node
	// or the Retry node around its attempts; Tekton: the first attempt's start); zero when it
	// does not know. Every TrainJob carries it (annotationFirstSince), so lost-seconds counts
	// every earlier attempt, even one whose TrainJob a deadline deleted.
	FirstSince time.Time
	// Recorded is the name of the TrainJob the face's record says this attempt created ("" when
	// none): a recorded job that the apiserver no longer has was deleted by someone, and the step
	// fails instead of training again from zero.
	Recorded string
	// Stop asks the engine to end the step (a cancel, an interrupt, a stopped workflow): its
	// TrainJob is deleted, unless KeepOnStop.
	Stop       bool
	KeepOnStop bool

	// faceAttempt is Identity.Attempt as the face gave it, once current (retry.go) has moved
	// the step to the retry it is at; retryOf and stepSince stamp a retry's TrainJob (markRetry).
	faceAttempt int
	retryOf     string
	stepSince   time.Time
	// firstSince is FirstSince as a retry's TrainJob inherits it from the job it replaces.
	firstSince time.Time
}

// Cluster is a face's view of the cluster.
type Cluster struct {
	// Cache is where the face reads TrainJobs (its informer cache, or a watch's store behind a
	// client.Reader), by name and, when Indexed, by trainstep's identity index.
	Cache   client.Reader
	Indexed bool
	// Shared says Cache hands out its own objects when asked (client.UnsafeDisableDeepCopy): the
	// engine only reads them, and a face answering many calls a second copies none.
	Shared bool
	// Scoped says Cache holds only the TrainJobs of the face's own run (Argo's sidecar: its
	// Workflow's), so one another run's step made, which this step follows (share.go), is read
	// from the apiserver.
	Scoped bool
	// API is the apiserver itself, asked what a lagging cache cannot answer: whether a recorded
	// job is really gone, whether a name is taken.
	API client.Reader
	// Writer creates, patches and deletes.
	Writer client.Client
	// Snapshot reads a TrainJob's pods, Events and Kueue Workload from the face's caches.
	Snapshot func(ctx context.Context, tj *trainer.TrainJob) (trainjob.Snapshot, error)
	// PodsBeforeVerdict, when set, lists a TrainJob's pods from the apiserver when the snapshot
	// has none and the verdict would rest on them (a return value, a startTimeout): a face whose
	// pod cache holds only pods it labelled (Tekton's) may not see an older job's.
	PodsBeforeVerdict func(ctx context.Context, tj *trainer.TrainJob) ([]corev1.Pod, error)
	// Logs reads the log tail of a failed pod.
	Logs trainjob.LogSource
	// Creates, when set, remembers this process's creates until the cache shows them (the
	// face's TrainJob informer calls Creates.Seen), so a look in between reads nothing.
	Creates *Creates
}

// Engine runs steps. It holds no state of any one step: Tails is a memory of log tails already
// read (a failed pod's log does not change), shared by every step of the face.
type Engine struct {
	Cluster
	Planner *trainjob.Planner
	Tails   *trainjob.Tails
	Clock   clock.PassiveClock
	// Warn is told of a write that failed and that the next look tries again (recording the
	// start): the step carries on.
	Warn func(ctx context.Context, msg string, err error)
	// RBAC names where the face's rules are, for a refusal's fix (manifests/tekton/rbac.yaml).
	RBAC string
	// RecordStartAside records a job's start beside the look rather than within it, for a face
	// whose look answers a waiting caller (Argo's agent): the record is bookkeeping no answer
	// depends on, and behind the client's rate limit a burst of newly started jobs would hold
	// every call that meets one.
	RecordStartAside bool
	// marks are the starts this engine recorded that the cache does not show yet, so a look in
	// between does not record them again.
	marks marks
}

// Status is where a step stands after a look.
type Status struct {
	// Observation is the step as the user sees it: phase, reason, message (with the failing
	// pod's log tail), and every output. Name is the TrainJob's once there is one.
	trainjob.Observation
	// Created says this look created the TrainJob.
	Created bool
	// Invalid, when set, says the step itself is wrong (a step.IsInvalid error naming the field
	// and the fix, or the TrainJob it renders): nothing was created and no retry helps.
	Invalid error
	// Stopped says the step was stopped (Step.Stop); Deleted that its TrainJob was deleted (at a
	// deadline, on a stop), Kept that it was left in place past its timeout, Released that the
	// step let go of a TrainJob other steps of its cache key follow, which runs on for them.
	Stopped, Deleted, Kept, Released bool
	// Trouble says the message names why a job that is not running is not: news for the user now.
	Trouble bool
	// Wake is when to look again though nothing changes (the next deadline); zero is never.
	Wake time.Time
	// Err is trouble that may pass (the apiserver unreachable, a write refused for now): the
	// face looks again later; Observation says what is known.
	Err error
}

// Done says the step has ended: the face reports it and never looks again.
func (s Status) Done() bool {
	return s.Err == nil && (s.Invalid != nil || s.Stopped || s.Phase.Terminal())
}

// Look does the one next thing for the step and says where it stands.
func (e *Engine) Look(ctx context.Context, s Step) Status {
	var tj *trainer.TrainJob
	if retries(s) == 0 { // a step that retries itself finds the retry it is at (current)
		var err error
		if tj, err = e.Find(ctx, s.Namespace, s.Identity); err != nil {
			return withAttempt(s, lookFailed(s, err))
		}
	}
	return e.LookAt(ctx, s, tj)
}

// LookAt is Look for a face that has just read the attempt's TrainJob with Find for a check of
// its own (Argo's face, which makes sure of a finished job's run first): tj is what Find returned
// for s.Identity, nil when it found none, and it is not read again. A face that looks again later
// calls Look: a found job is only as fresh as the look it was found for.
func (e *Engine) LookAt(ctx context.Context, s Step, tj *trainer.TrainJob) Status {
	s.faceAttempt = s.Identity.Attempt
	s, tj, err := e.current(ctx, s, tj)
	if err != nil {
		return withAttempt(s, lookFailed(s, err))
	}
	if tj == nil {
		// No job of its own in the cache: perhaps one it follows (share.go), or its own that only
		// the apiserver shows yet (a cache Scoped to the face's run, lagging behind a retry's
		// create, is looked past for holds), bounded as current() bounds a retry's job.
		held, err := e.held(ctx, s)
		if err != nil {
			return withAttempt(s, lookFailed(s, err))
		}
		if held != nil && s.Identity.Adopts(held) {
			s = sinceOfRetry(s, retryIndex(s), held)
		}
		tj = held
	}
	st := e.look(ctx, s, tj)
	// A retry's replaced job whose delete failed, at every later look; a step ends only once it
	// is gone, since its face looks no more then.
	if err := e.endEarlierRetries(ctx, s); err != nil && st.Done() {
		st.Err = err
		st.Message += "; " + err.Error() + "; tried again"
	}
	if st.Err != nil && st.Message == "" {
		st.Message = st.Err.Error() // what a face shows while it tries again
	}
	return e.store(ctx, s, tj, withAttempt(s, classified(st)))
}

// withAttempt gives the status of a step that names a checkpoint its attempt, so every face
// writes its attempt and resumed-from outputs (trainjob.ResumeOutputNames) and the final
// message says what a resumed step resumed from. A step without one writes neither: they say
// nothing about a step that cannot resume.
func withAttempt(s Step, st Status) Status {
	if s.Spec == nil || s.Spec.Checkpoint == nil {
		st.Attempt = nil // a resumed job's label gives one (Observe); it is no output of this step
		return st
	}
	st.Attempt = ptr.To(s.Identity.Attempt)
	// A running job's message says it already (Observe); a finished one's is the Trainer's.
	if note := st.ResumeNote(); note != "" && st.Phase.Terminal() {
		st.Message += "; " + note
	}
	return st
}

func lookFailed(s Step, err error) Status {
	return Status{Err: err, Observation: trainjob.Observation{Namespace: s.Namespace, Name: s.Recorded, Message: err.Error()}}
}

func (e *Engine) look(ctx context.Context, s Step, tj *trainer.TrainJob) Status {
	if s.Stop {
		return e.stop(ctx, s, tj)
	}
	if tj == nil {
		return e.absent(ctx, s)
	}
	if !s.Identity.Adopts(tj) && !s.Identity.Holds(tj) {
		return failed(s, tj.Name, ReasonNameTaken, fmt.Sprintf("%v: %s/%s", trainjob.ErrNameTaken, tj.Namespace, tj.Name))
	}
	return e.follow(ctx, s, tj)
}

// Find is the attempt's TrainJob as the face's cache has it: by its name, or else by its
// identity labels (a job an earlier release made under another name). Nil when neither; a job
// of that name that is someone else's when only the name matches (Look fails the step on it).
// With Cluster.Shared it is the cache's own object: read it only.
func (e *Engine) Find(ctx context.Context, namespace string, id trainjob.Identity) (*trainer.TrainJob, error) {
	tj := &trainer.TrainJob{}
	err := e.Cache.Get(ctx, client.ObjectKey{Namespace: namespace, Name: id.Name()}, tj, e.cacheGet()...)
	switch {
	case err == nil && id.Owns(tj.Labels):
		return tj, nil
	case err != nil && !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading TrainJob %s/%s: %w", namespace, id.Name(), err)
	}
	found, ferr := trainjob.FindByIdentity(ctx, e.Cache, namespace, id, e.Indexed)
	switch {
	case ferr != nil:
		return nil, ferr
	case found != nil:
		return found, nil
	case err == nil:
		return tj, nil // the name is someone else's job
	}
	return nil, nil
}

// cacheGet are the options of a read from Cache: its own object when Shared (read it only).
func (e *Engine) cacheGet() []client.GetOption {
	if e.Shared {
		return []client.GetOption{client.UnsafeDisableDeepCopy}
	}
	return nil
}

func (e *Engine) now() time.Time {
	if e.Clock == nil {
		return time.Now()
	}
	return e.Clock.Now()
}

// failed is a step that ended on a cause of its own (not the TrainJob's conditions).
func failed(s Step, name, reason, msg string) Status {
	return Status{Observation: trainjob.Observation{Namespace: s.Namespace, Name: name,
		Phase: trainjob.PhaseFailed, Reason: reason, Message: msg}}
}

// stop ends a stopped step: its TrainJob is deleted unless the step keeps it or it already
// ended (a failed job whose retry waits out its backoff), which stays for its logs as a failed
// step's does, until its owner goes: what the Argo face's reaper does (Abandon), on every face.
func (e *Engine) stop(ctx context.Context, s Step, tj *trainer.TrainJob) Status {
	st := Status{Stopped: true, Observation: trainjob.Observation{Namespace: s.Namespace, Name: s.Recorded}}
	if tj != nil {
		st.Name = tj.Name
	}
	if st.Name == "" || s.KeepOnStop || (tj != nil && trainjob.Observe(tj, nil).Phase.Terminal()) {
		return st
	}
	if tj == nil || len(trainjob.Holders(tj)) > 0 {
		// Whether other steps follow the job is read from the apiserver itself: a cache that
		// lags behind a step that just joined must not have it deleted under that step.
		fresh := &trainer.TrainJob{}
		err := e.API.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: st.Name}, fresh)
		if err != nil && !apierrors.IsNotFound(err) {
			st.Err = fmt.Errorf("reading TrainJob %s/%s to stop it: %w", s.Namespace, st.Name, err)
			return st
		}
		if err == nil && len(trainjob.Holders(fresh)) > 0 {
			deleted, left, err := release(ctx, e.Writer, fresh, s.Identity.OwnerUID, ownerRef(s.Identity)...)
			st.Deleted, st.Released, st.Err = deleted, !deleted && left > 0 && err == nil, err
			if st.Released {
				st.Message = strings.TrimPrefix(releasedNote(st.Name, left), "; ")
			}
			return st
		}
		if err == nil && !s.Identity.Adopts(fresh) {
			return st // another step's job, which this one no longer holds: not its to delete
		}
		if err == nil && trainjob.Observe(fresh, nil).Phase.Terminal() {
			return st
		}
	}
	if err := trainjob.Delete(ctx, e.Writer, s.Namespace, st.Name); err != nil {
		st.Err = err
		return st
	}
	st.Deleted = true
	return st
}

// ErrCacheLags says the TrainJob this step created is not in the face's cache yet: its watch
// brings it, and the face looks again then.
var ErrCacheLags = errors.New("the TrainJob this step created is not in the cache yet")
