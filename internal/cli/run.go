package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/core/lifecycle"
	"github.com/trainstep/trainstep/core/local"
	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainers"
	"github.com/trainstep/trainstep/core/trainjob"
)

type runOptions struct {
	kubeFlags
	file         string
	local        bool
	dryRun       bool
	outputDir    string
	stepKey      string
	ownerUID     string
	ownerPod     string
	ownerPodUID  string
	attempt      int
	runPart      string
	runtimesFrom string
	keepOnStop   bool
	noLogs       bool
	// checkpointRoot is where --local keeps each step's checkpoints (local.CheckpointDir).
	checkpointRoot string

	stdin          io.Reader
	stdout, stderr io.Writer
	// logs overrides the kubelet log source (tests: the Trainer simulator's).
	logs trainjob.LogSource
	// config adjusts the cluster config (tests: counting connections and requests).
	config func(*rest.Config)
	// view shows the running step's progress (progress.go); nil until the step runs.
	view *progressView
}

func newRunCommand(code *int, ov Overrides) *cobra.Command {
	o := &runOptions{logs: ov.Logs, config: ov.Config}
	o.offCluster = "--local to train on this machine"
	cmd := &cobra.Command{
		Use:   "run -f STEP.yaml",
		Short: "Run one training step: submit its TrainJob, wait for it, write its outputs",
		Long: `Run one training step: validate it, pick its runtime, submit the TrainJob once, stream the
node-0 log, wait for the TrainJob to finish and write every output to --output-dir.

Exit codes: 0 succeeded, 1 the TrainJob failed, 2 invalid step (nothing created), 3 timed out,
4 could not run (cluster or API error), 5 --local entry point (torchrun, mpirun, python) missing,
130 interrupted (the TrainJob is deleted unless --keep-on-interrupt).`,
		// The engine recipes of docs/cli.md, short: a user at a prompt sees them without the docs.
		Example: `  # Check a step anywhere: print the TrainJob it would create (no cluster needed)
  executor run -f train.yaml --dry-run

  # Train on this machine: the trainer's command as local processes, one per node
  executor run -f train.yaml --local

  # Train on the cluster of the kubeconfig's current context; each output is a file in ./out
  executor run -f train.yaml -n team-a --output-dir ./out

  # Inside an Argo container step: an output parameter reads its file with
  # valueFrom.path: /tmp/outputs/<name>
  /executor run -f /steps/train.yaml --output-dir /tmp/outputs \
    --step-key '{{node.name}}' --owner-uid '{{workflow.uid}}' --attempt '{{retries}}'

  # Inside a Tekton step: output <name> is written to /tekton/results/<name>, which is
  # $(results.<name>.path), so each result the Task declares under that name is filled
  /executor run -f /steps/train.yaml --output-dir /tekton/results \
    --step-key '$(context.task.name)' --owner-uid '$(context.taskRun.uid)' --attempt '$(context.task.retry-count)'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.stdin, o.stdout, o.stderr = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
			quietKlog(o.stderr)
			*code = o.run(cmd.Context())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.file, "file", "f", "", "the step, YAML or JSON (- for stdin)")
	f.BoolVar(&o.local, "local", false, "run the trainer as local processes instead of on a cluster")
	f.BoolVar(&o.dryRun, "dry-run", false, "print the TrainJob that would be created and stop")
	f.StringVar(&o.outputDir, "output-dir", "", "write each output to DIR/<name>, one file per output: /tmp/outputs in an Argo container step (outputs.parameters[].valueFrom.path: /tmp/outputs/<name>), /tekton/results in a Tekton step (the Task's declared results, $(results.<name>.path))")
	f.StringVar(&o.stepKey, "step-key", "", "a key unique to this step in its pipeline run; with --owner-uid, a re-run finds the same TrainJob")
	f.StringVar(&o.ownerUID, "owner-uid", "", "the UID of the pipeline run that owns the step (default: a fresh one, so every run starts a new TrainJob)")
	f.IntVar(&o.attempt, "attempt", 0, "the retry attempt (a new attempt gets a new TrainJob)")
	f.StringVar(&o.runPart, "run", os.Getenv("TRAINSTEP_RUN"), "which run of the pipeline this is, where the engine runs a finished step again under the same owner, key and attempt ($TRAINSTEP_RUN; in Argo the step pod's UID, which argo retry changes and a restarted container keeps): a new run gets a new TrainJob")
	f.StringVar(&o.ownerPod, "owner-pod", os.Getenv("TRAINSTEP_OWNER_POD"), "the step pod's name ($TRAINSTEP_OWNER_POD, from the downward API): the TrainJob is garbage-collected with the pod, so a step pod killed or lost leaves no TrainJob behind")
	f.StringVar(&o.ownerPodUID, "owner-pod-uid", os.Getenv("TRAINSTEP_OWNER_POD_UID"), "the step pod's UID ($TRAINSTEP_OWNER_POD_UID, downward API metadata.uid); needed with --owner-pod")
	f.StringVar(&o.runtimesFrom, "runtimes-from", "auto", "with --local or --dry-run: where runtimes come from: auto (the cluster if reachable, else stock), cluster, stock")
	f.BoolVar(&o.keepOnStop, "keep-on-interrupt", false, "leave the TrainJob running when this command is interrupted")
	f.BoolVar(&o.noLogs, "no-logs", false, "do not stream the node-0 log")
	f.StringVar(&o.checkpointRoot, "checkpoint-dir", "", "with --local: where checkpoints are kept, each step's in <dir>/<owner-uid or local>/<step-key>, or without --step-key <dir>/<owner-uid or local>/step-<hash of the step>, the same for every --attempt, so a retry resumes (default $XDG_STATE_HOME/trainstep/checkpoints or ~/.local/state/trainstep/checkpoints)")
	o.bind(f)
	o.bindNamespace(f, "", "the step namespace")
	_ = cmd.MarkFlagRequired("file")
	// What shell completion offers (executor completion bash|zsh|fish).
	_ = cmd.MarkFlagFilename("file", "yaml", "yml", "json")
	_ = cmd.MarkFlagDirname("output-dir")
	_ = cmd.MarkFlagDirname("checkpoint-dir")
	_ = cmd.RegisterFlagCompletionFunc("runtimes-from", cobra.FixedCompletions([]string{"auto", "cluster", "stock"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (o *runOptions) say(format string, args ...any) {
	if o.view != nil {
		o.view.say(fmt.Sprintf("trainstep: "+format, args...))
		return
	}
	fmt.Fprintf(o.stderr, "trainstep: "+format+"\n", args...)
}

func (o *runOptions) run(ctx context.Context) int {
	if (o.ownerPod == "") != (o.ownerPodUID == "") {
		return o.fail(step.Invalid(field.ErrorList{field.Required(field.NewPath("--owner-pod-uid"),
			"--owner-pod and --owner-pod-uid go together: set both from the downward API (metadata.name, metadata.uid), or neither")}))
	}
	spec, err := o.readSpec()
	if err != nil {
		return o.fail(err)
	}
	if o.local {
		return o.runLocal(ctx, spec)
	}
	if o.dryRun {
		return o.dryRunPlan(ctx, spec)
	}
	cfg, err := o.restConfig()
	if err != nil {
		return o.fail(err)
	}
	if o.config != nil {
		o.config(cfg)
	}
	// One HTTP client for every request of the step: the submit, the three watches and the log
	// stream share its HTTP/2 connection (client-go multiplexes them as streams), so a step holds
	// one connection to the apiserver however many watches it runs.
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return o.fail(fmt.Errorf("connecting to the cluster at %s: %w", cfg.Host, err))
	}
	c, err := newClientFor(cfg, hc)
	if err != nil {
		return o.fail(err)
	}
	ns := o.ns()
	kube, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return o.fail(fmt.Errorf("connecting to the cluster: %w", err))
	}
	logs := o.logs
	if logs == nil {
		logs = trainjob.KubeletLogs{Client: kube}
	}
	runner := &lifecycle.Runner{Client: c, Logs: logs, RBAC: "the Role docs/cli.md lists for the step's ServiceAccount",
		Planner: &trainjob.Planner{Trainers: trainers.Builtin(), Runtimes: runtimes.ClusterSource{Reader: c}, Detector: &trainjob.APIDetector{Reader: c}}}
	s := lifecycle.Step{Spec: spec, Namespace: ns, Identity: o.identity(spec), Deadlines: trainjob.StepDeadlines(spec), KeepOnStop: o.keepOnStop}
	// Bad input and missing rights are said before anything is created.
	plan, err := runner.Check(ctx, s)
	if err != nil {
		return o.fail(err)
	}
	o.warn(plan)
	if err := trainjob.CheckAccess(ctx, c, ns, trainjob.FollowNeeds()); err != nil {
		return o.fail(err)
	}
	return o.follow(ctx, runner, s, plan, logs)
}

// follow runs the step with the core's lifecycle, showing it on the way, and maps its end to
// the exit code.
func (o *runOptions) follow(ctx context.Context, runner *lifecycle.Runner, s lifecycle.Step, plan *trainjob.Plan, logs trainjob.LogSource) int {
	follower, _ := logs.(trainjob.LogFollower)
	streaming, announced := false, false
	o.view = newProgressView(o.stderr)
	announce := func(st lifecycle.Status) {
		if !announced && st.Name != "" {
			announced = true
			verb := "found existing"
			switch {
			case st.Created:
				verb = "created"
			case st.Cached != nil:
				verb = "following" // a TrainJob another step of its cache key started
			}
			o.say("%s TrainJob %s/%s (runtime %s, %s)", verb, s.Namespace, st.Name, plan.Runtime.Name, plan.Trainer.Kind())
		}
	}
	st, err := runner.Run(ctx, s, lifecycle.RunOptions{
		OnChange: func(st lifecycle.Status) {
			announce(st)
			o.view.update(st.Observation)
			if !streaming && !o.noLogs && follower != nil && st.Node0Pod != "" {
				streaming = true
				go o.streamLog(ctx, follower, st.Namespace, st.Node0Pod)
			}
		},
		OnWarning: func(err error) { o.say("warning: %v; tried again at the next change", err) },
	})
	announce(st) // a job found finished is followed by no change
	switch {
	case err != nil && ctx.Err() != nil:
		return o.interrupted(st)
	case err != nil:
		if st.Deleted {
			o.say("deleted TrainJob %s/%s: the step cannot follow it, so nothing is left running", s.Namespace, st.Name)
		}
		return o.fail(err)
	case st.Invalid != nil:
		return o.fail(st.Invalid)
	}
	return o.finish(st.Observation)
}

func (o *runOptions) streamLog(ctx context.Context, f trainjob.LogFollower, ns, pod string) {
	if err := f.Follow(ctx, ns, pod, trainjob.NodeContainer, o.view.logs(o.stdout)); err != nil && ctx.Err() == nil {
		o.say("not streaming the node-0 log: %v", err)
	}
}

// interrupted reports a step stopped from outside (an Argo stop, a Tekton cancel, Ctrl-C): the
// core deleted its TrainJob, unless --keep-on-interrupt, so none is orphaned, or let go of one
// other steps of its cache key follow, which runs on for them.
func (o *runOptions) interrupted(st lifecycle.Status) int {
	switch {
	case st.Name == "":
		o.say("interrupted before a TrainJob was created")
	case st.Err != nil:
		o.say("interrupted, and stopping TrainJob %s/%s failed: %v", st.Namespace, st.Name, st.Err)
	case st.Deleted:
		o.say("interrupted; deleted TrainJob %s/%s", st.Namespace, st.Name)
	case st.Released:
		o.say("interrupted; %s", st.Message)
	default:
		o.say("interrupted; TrainJob %s/%s keeps running (--keep-on-interrupt)", st.Namespace, st.Name)
	}
	return ExitInterrupts
}

// identity is the step's: the owner and step key given (a fresh UID and "run" without them),
// the attempt and run part, and the step's namePrefix, if any, for how the name reads.
func (o *runOptions) identity(spec *step.Spec) trainjob.Identity {
	owner := o.ownerUID
	if owner == "" {
		owner = uuid.NewString()
	}
	key := o.stepKey
	if key == "" {
		key = "run"
	}
	id := trainjob.Identity{Engine: "cli", OwnerUID: owner, StepKey: key, Attempt: o.attempt, Run: o.runPart, NamePrefix: spec.NamePrefix}
	if o.ownerPod != "" {
		// Not a controller and not blocking: the pod owns the TrainJob only for garbage collection.
		id.Owner = &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: o.ownerPod, UID: types.UID(o.ownerPodUID)}
	}
	return id
}

func (o *runOptions) readSpec() (*step.Spec, error) {
	var (
		data []byte
		err  error
	)
	if o.file == "-" {
		data, err = io.ReadAll(o.stdin)
	} else {
		data, err = os.ReadFile(o.file)
	}
	if err != nil {
		return nil, step.Invalid(field.ErrorList{field.Invalid(field.NewPath("--file"), o.file, fmt.Sprintf("cannot be read: %v", err))})
	}
	return step.Parse(data)
}

func (o *runOptions) warn(plan *trainjob.Plan) {
	for _, w := range plan.Warnings {
		o.say("warning: %s", w)
	}
}

func (o *runOptions) printYAML(v any) int {
	b, err := yaml.Marshal(v)
	if err != nil {
		return o.fail(err)
	}
	_, _ = o.stdout.Write(b)
	return ExitSucceeded
}

// finish writes the outputs and maps the phase to the exit code.
func (o *runOptions) finish(obs trainjob.Observation) int {
	if o.view != nil {
		o.view.done()
	}
	outs := obs.Outputs()
	if o.outputDir != "" {
		if err := writeOutputs(o.outputDir, outs); err != nil {
			return o.fail(err)
		}
	}
	o.say("%s: %s", obs.Phase, obs.Message)
	if outs[trainjob.OutTraining] != "" {
		queued := cmp.Or(outs[trainjob.OutQueueWait], "0")
		o.say("cost: %ss queued, %ss initializing, %ss training, %ss lost to earlier attempts; %s GPU-hours",
			queued, outs[trainjob.OutInitializing], outs[trainjob.OutTraining], outs[trainjob.OutLost], outs[trainjob.OutGPUHours])
	}
	b, _ := yaml.Marshal(map[string]any{"outputs": outs})
	_, _ = o.stdout.Write(b)
	switch obs.Phase {
	case trainjob.PhaseSucceeded:
		return ExitSucceeded
	case trainjob.PhaseTimedOut:
		return ExitTimedOut
	default:
		return ExitFailed
	}
}

func writeOutputs(dir string, outs map[string]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("making the output directory: %w", err)
	}
	names := make([]string, 0, len(outs))
	for n := range outs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(outs[n]), 0o644); err != nil {
			return fmt.Errorf("writing output %s: %w", n, err)
		}
	}
	return nil
}

func (o *runOptions) fail(err error) int {
	switch {
	case step.IsInvalid(err):
		fmt.Fprintln(o.stderr, err.Error())
		fmt.Fprintln(o.stderr, "nothing was created")
		return ExitInvalid
	case errors.Is(err, local.ErrEntrypointMissing):
		o.say("%v", err)
		return ExitNoEntry
	}
	o.say("error: %v", err)
	return ExitError
}
