package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/trainstep/trainstep/core/local"
	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/runtimes/stock"
	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainers"
	"github.com/trainstep/trainstep/core/trainjob"
)

// runLocal runs the step on this machine: the same plan and TrainJob as on a cluster, its trainer
// command run as local processes.
func (o *runOptions) runLocal(ctx context.Context, spec *step.Spec) int {
	// Where the checkpoints are is the first thing said: the directory is what a rerun resumes.
	var ckpt string
	if !o.dryRun {
		dir, err := o.localCheckpoints(spec)
		if err != nil {
			return o.fail(err)
		}
		ckpt = dir
	}
	src, err := o.localRuntimes(ctx)
	if err != nil {
		return o.fail(err)
	}
	ns := o.namespace
	if ns == "" {
		ns = "local"
	}
	plan, err := (&trainjob.Planner{Trainers: trainers.Builtin(), Runtimes: src}).Plan(ctx, spec, ns)
	if err != nil {
		return o.fail(err)
	}
	o.warn(plan)
	if spec.Pod != nil && !o.dryRun {
		o.say("warning: the pod block shapes the pods on a cluster; local processes get no volumes, placement or Secret env (a pod.env name set in this shell is passed through)")
	}
	tj := plan.TrainJob(o.identity(spec))
	if o.dryRun {
		fmt.Fprintf(o.stdout, "# Trainer API: %s\n", plan.API.Source)
		return o.printYAML(tj)
	}
	if err := os.MkdirAll(ckpt, 0o755); err != nil {
		return o.fail(fmt.Errorf("making the local checkpoint directory (--checkpoint-dir): %w", err))
	}
	o.say("running TrainJob %s locally: runtime %s, %s, %d node(s), attempt %d", tj.Name, plan.Runtime.Name, plan.Trainer.Kind(), plan.NumNodes(), o.attempt)
	runCtx := ctx
	if spec.Timeout != nil {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, spec.Timeout.Duration)
		defer cancel()
	}
	o.view = newProgressView(o.stderr)
	out := o.view.logs(o.stdout)
	if o.noLogs {
		out = nil
	}
	res, err := (&local.Runner{Out: out, OnProgress: o.view.update, CheckpointDir: ckpt, Attempt: o.attempt}).Run(runCtx, tj, &plan.Runtime)
	if err != nil {
		return o.fail(err)
	}
	obs := res.Observe()
	switch {
	case ctx.Err() != nil:
		o.say("interrupted; the local processes were stopped")
		return ExitInterrupts
	case errors.Is(runCtx.Err(), context.DeadlineExceeded):
		now := time.Now()
		obs.Phase, obs.Reason, obs.CompletionTime = trainjob.PhaseTimedOut, trainjob.ReasonTimeout, &now
		obs.Failure = trainjob.Classified(trainjob.ClassTimeout)
		obs.Message = fmt.Sprintf("TrainJob %s did not finish within %s; its processes were stopped", tj.Name, spec.Timeout.Duration)
	}
	return o.finish(obs)
}

// localCheckpoints is the step's checkpoint directory on this machine, and says where it is:
// every step has one, checkpoint block or not, so any step can resume locally; every attempt of
// the same owner and step key gets the same one. Without --step-key the key is the step's content
// (local.ContentKey), not a fixed "run": two different steps run without flags never share one.
func (o *runOptions) localCheckpoints(spec *step.Spec) (string, error) {
	root := o.checkpointRoot
	if root == "" {
		var err error
		if root, err = local.CheckpointRoot(); err != nil {
			return "", err
		}
	}
	// The nodes run in their own working directories: a relative root would be a new one in each.
	root, err := filepath.Abs(root)
	if err != nil {
		return "", fmt.Errorf("--checkpoint-dir: %w", err)
	}
	if o.stepKey != "" {
		dir := local.CheckpointDir(root, o.ownerUID, o.stepKey)
		o.say("checkpoints in %s", dir)
		return dir, nil
	}
	key, err := local.ContentKey(spec)
	if err != nil {
		return "", err
	}
	dir := local.CheckpointDir(root, o.ownerUID, key)
	o.say("checkpoints in %s (this step's own, keyed by its content: running it again resumes them, a changed step starts afresh; --step-key names the directory instead)", dir)
	return dir, nil
}

// dryRunPlan prints the TrainJob a run would create. Like --local, it plans against the cluster's
// runtimes when one is reachable and the stock ones otherwise, so a step can be checked anywhere.
func (o *runOptions) dryRunPlan(ctx context.Context, spec *step.Spec) int {
	src, err := o.localRuntimes(ctx)
	if err != nil {
		return o.fail(err)
	}
	planner := &trainjob.Planner{Trainers: trainers.Builtin(), Runtimes: src}
	if cs, ok := src.(runtimes.ClusterSource); ok {
		planner.Detector = &trainjob.APIDetector{Reader: cs.Reader}
	}
	plan, err := planner.Plan(ctx, spec, o.ns())
	if err != nil {
		return o.fail(err)
	}
	o.warn(plan)
	o.say("Trainer API: %s; the pod block goes to spec.%s", plan.API.Source, plan.API.PodMechanism)
	if note := progressGate(ctx, src, o.ns()); note != "" {
		o.say("%s", note)
	}
	tj, err := plan.Object(o.identity(spec))
	if err != nil {
		return o.fail(err)
	}
	fmt.Fprintf(o.stdout, "# Trainer API: %s\n", plan.API.Source)
	return o.printYAML(tj)
}

// localRuntimes is the cluster's runtimes when one is reachable (so --local tries exactly what the
// cluster would run), else the stock ones shipped in the binary.
func (o *runOptions) localRuntimes(ctx context.Context) (runtimes.Source, error) {
	if o.runtimesFrom == "stock" {
		return stock.Source{}, nil
	}
	// Already off the cluster (--local, --dry-run): the way round a missing cluster is the stock runtimes.
	k := o.kubeFlags
	k.offCluster = "--runtimes-from=stock"
	cfg, err := k.restConfig()
	if err == nil {
		cl, cerr := newClient(cfg)
		if cerr == nil {
			c := runtimes.ClusterSource{Reader: cl}
			probe, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = c.List(probe, o.ns())
			cancel()
			if err == nil {
				o.say("using the runtimes of the cluster at %s", cfg.Host)
				return c, nil
			}
		} else {
			err = cerr
		}
	}
	if o.runtimesFrom == "cluster" {
		return nil, fmt.Errorf("--runtimes-from=cluster: %w", err)
	}
	o.say("no cluster reachable; using the stock Kubeflow Trainer runtimes (%v)", reason(err))
	return stock.Source{}, nil
}
