package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
)

// Runner runs one step to its end in one process (`executor run`): it watches the step's
// TrainJob, pods, Events and Workload, and looks again with the engine at every change and at
// every deadline. It never polls.
type Runner struct {
	// Client reads, watches and writes; share its HTTP client with the log stream so the step
	// holds one connection to the apiserver.
	Client  client.WithWatch
	Planner *trainjob.Planner
	Logs    trainjob.LogSource
	Clock   clock.PassiveClock
	// RBAC names where the step's rules are, for a refusal's fix.
	RBAC string
}

// RunOptions shape one run.
type RunOptions struct {
	// OnChange is told each new status on the way (phase, message, running nodes or progress
	// changed); the last one is Run's result, not a change.
	OnChange func(Status)
	// OnWarning is told of trouble the run carries on through (recording the start, reading
	// Kueue's Workload).
	OnWarning func(error)
}

// stopWithin bounds the delete of a step whose process is going away (interrupted, or unable
// to follow its job): it has its own context, the step's being gone.
const stopWithin = 10 * time.Second

// Run runs the step until it ends and returns its last status. When ctx ends (the step is
// stopped: an Argo stop, a Tekton cancel, Ctrl-C) or the step can no longer follow its
// TrainJob (a watch it may not make), the step is stopped: its TrainJob is deleted, unless
// s.KeepOnStop for a stop, and the error says why.
func (r *Runner) Run(ctx context.Context, s Step, opts RunOptions) (Status, error) {
	if s.Begun.IsZero() {
		s.Begun = r.now() // the timeout counts from here while no TrainJob is made (engine.go)
	}
	w, err := r.watch(ctx, s.Namespace, TrainJobNames(s)[retries(s)], opts) // its first TrainJob
	if err != nil {
		return Status{}, err
	}
	defer func() { w.close() }()
	e := r.engine(w, opts)
	var last Status
	delay := time.Duration(0)
	for {
		st := e.Look(w.ctx, s)
		if st.Name != "" && st.Reason != ReasonNameTaken {
			s.Recorded = st.Name // gone from now on, it was deleted
		}
		if st.Done() {
			return st, nil
		}
		if changedEnough(last, st) && opts.OnChange != nil {
			opts.OnChange(st)
		}
		last = st
		if st.Name != "" && st.Name != w.name {
			// A job of this step's identity an earlier release made under another name, or the
			// step's own retry (retry.go): follow it.
			w.close()
			next, err := r.watch(ctx, s.Namespace, st.Name, opts)
			if err != nil {
				// A step that cannot follow its job (a watch it may not make) is stopped like
				// one whose watch ends: its retry deleted, a followed job let go of. w, closed,
				// stays for the deferred close: closing twice is harmless.
				return r.stop(ctx, s, st, err)
			}
			w, e = next, r.engine(next, opts)
			continue
		}
		wake := st.Wake
		if st.Err != nil && !errors.Is(st.Err, ErrCacheLags) {
			// Trouble that may pass: look again with back-off, or at the next change, or at
			// the step's deadline (Wake), whichever comes first.
			delay = min(max(2*delay, backoffFirst), backoffMax)
			wake = earliest(r.now().Add(delay), st.Wake)
		} else {
			delay = 0
		}
		if err := r.sleep(w, wake); err != nil {
			return r.stop(ctx, s, st, err)
		}
	}
}

// watch starts the watches of TrainJob name and waits for them to list, so the first look sees
// what is there; an error when they cannot (the watches are stopped then).
func (r *Runner) watch(ctx context.Context, namespace, name string, opts RunOptions) (*watches, error) {
	w, err := startWatches(ctx, r.Client, namespace, name, opts.OnWarning)
	if err != nil {
		return nil, err
	}
	if !w.synced() {
		err := fmt.Errorf("watching TrainJob %s/%s: %w", namespace, name, context.Cause(w.ctx))
		w.close()
		return nil, err
	}
	return w, nil
}

// sleep waits for a change or for wake; an error when the step must stop.
func (r *Runner) sleep(w *watches, wake time.Time) error {
	var timer <-chan time.Time
	if !wake.IsZero() {
		t := time.NewTimer(max(wake.Sub(r.now()), 0))
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-w.changed:
	case <-timer:
	case <-w.ctx.Done():
		return context.Cause(w.ctx)
	}
	return nil
}

// stop ends a step its process leaves: the engine deletes its TrainJob (unless a stop keeps
// it), on a context of its own.
func (r *Runner) stop(ctx context.Context, s Step, last Status, why error) (Status, error) {
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopWithin)
	defer cancel()
	s.Stop = true
	s.KeepOnStop = s.KeepOnStop && ctx.Err() != nil // a step that cannot follow its job keeps nothing
	st := r.engine(nil, RunOptions{}).Look(stopCtx, s)
	if st.Name == "" {
		st.Name = last.Name
	}
	if st.Err != nil {
		return st, fmt.Errorf("%w; and stopping its TrainJob failed: %w", why, st.Err)
	}
	return st, fmt.Errorf("following TrainJob %s/%s: %w", s.Namespace, st.Name, why)
}

// engine is the lifecycle engine on the run's watches (on the apiserver when w is nil: a stop
// after the watches ended).
func (r *Runner) engine(w *watches, opts RunOptions) *Engine {
	e := &Engine{
		Cluster: Cluster{Cache: r.Client, API: r.Client, Writer: r.Client, Logs: r.Logs, Creates: NewCreates(),
			Snapshot: func(_ context.Context, tj *trainer.TrainJob) (trainjob.Snapshot, error) {
				return trainjob.Snapshot{TrainJob: tj}, nil
			}},
		Planner: r.Planner,
		Clock:   r.Clock,
		RBAC:    r.RBAC,
		Warn: func(_ context.Context, msg string, err error) {
			if opts.OnWarning != nil {
				opts.OnWarning(fmt.Errorf("%s: %w", msg, err))
			}
		},
	}
	if w != nil {
		e.Cache, e.Snapshot, e.Creates = reader{Reader: r.Client, w: w}, w.snapshot, w.creates
	}
	return e
}

func (r *Runner) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

func changedEnough(a, b Status) bool {
	return a.Phase != b.Phase || a.Message != b.Message || a.RunningNodes != b.RunningNodes ||
		ptr.Deref(a.Progress, -1) != ptr.Deref(b.Progress, -1)
}

// Check plans the step without creating anything, for a face that says what is wrong with its
// input before it acts: a step.IsInvalid error names the field and the fix. The plan carries
// its warnings and what it bound the step to (runtime, trainer).
func (r *Runner) Check(ctx context.Context, s Step) (*trainjob.Plan, error) {
	plan, err := r.Planner.Plan(ctx, s.Spec, s.Namespace)
	if err != nil {
		return nil, err
	}
	if _, err := plan.Object(s.Identity); err != nil {
		return nil, err
	}
	return plan, nil
}
