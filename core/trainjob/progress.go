package trainjob

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
)

// The Trainer's progress (status.trainerStatus, written by its status server from what rank 0
// posts; Trainer v2.2+ with the TrainJobStatus feature gate) as every face shows it: one short
// line, "42% · 12m left · loss=0.31 acc=0.88", and each final metric as an output metric-<name>.

// progressSep separates the parts of the progress line, and the line from the message it ends.
// No other message trainstep writes contains it, so WithoutProgress can cut there.
const progressSep = " · "

// ProgressEvery is how often a face that writes to the engine on every change (Tekton's
// CustomRun message) lets a change of progress alone through: a trainer posting every step
// must not flood the engine.
const ProgressEvery = 10 * time.Second

// MetricPrefix names the output of one final metric: metric-<name>.
const MetricPrefix = "metric-"

// ProgressLine is what the Trainer last reported, as one line: percent, time left, metrics in
// the order reported. Empty when nothing was reported.
func (o Observation) ProgressLine() string {
	var parts []string
	if o.Progress != nil {
		parts = append(parts, fmt.Sprintf("%d%%", *o.Progress))
	}
	if o.Remaining != nil && (o.Progress == nil || *o.Progress < 100) {
		parts = append(parts, ETA(time.Duration(*o.Remaining)*time.Second)+" left")
	}
	if m := o.MetricsLine(); m != "" {
		parts = append(parts, m)
	}
	return strings.Join(parts, progressSep)
}

// MetricsLine is "loss=0.31 acc=0.88", in the order the trainer reported them.
func (o Observation) MetricsLine() string {
	ms := make([]string, 0, len(o.Metrics))
	for _, n := range o.metricNames() {
		ms = append(ms, n+"="+o.Metrics[n])
	}
	return strings.Join(ms, " ")
}

// metricNames is MetricOrder, or the map's names sorted where the order is unknown.
func (o Observation) metricNames() []string {
	if len(o.MetricOrder) == len(o.Metrics) {
		return o.MetricOrder
	}
	names := make([]string, 0, len(o.Metrics))
	for n := range o.Metrics {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ETA renders a remaining time the way people say it: 45s, 1m30s, 12m, 1h05m.
func ETA(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 10*time.Minute:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Round(time.Minute).Minutes()))
	default:
		d = d.Round(time.Minute)
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

// addNote adds a clause to the message before its progress line: the line stays last, and
// what is news (a node that restarted, a pod that cannot be scheduled) is part of the state
// WithoutProgress keeps, so a face neither cuts it (a terminal's status line) nor holds it back
// as if it were progress (ThrottleProgress).
func (o *Observation) addNote(clause string) {
	state, progress, found := strings.Cut(o.Message, progressSep)
	o.Message = state + "; " + clause
	if found {
		o.Message += progressSep + progress
	}
}

// WithoutProgress is msg without its progress line: two messages that differ only there are
// the same state of the job, reported at another point of training.
func WithoutProgress(msg string) string {
	before, _, _ := strings.Cut(msg, progressSep)
	return before
}

// ThrottleProgress decides what a face writes when its last write was prev at prevAt: next,
// unless next differs from prev only in its progress line (the first progress line is news) and
// less than every has passed, when it keeps prev and says how long until next may go (the face looks again then).
func ThrottleProgress(prev string, prevAt time.Time, next string, now time.Time, every time.Duration) (string, time.Duration) {
	if prev == next || WithoutProgress(prev) != WithoutProgress(next) || !strings.Contains(prev, progressSep) || prevAt.IsZero() {
		return next, 0
	}
	if wait := every - now.Sub(prevAt); wait > 0 {
		return prev, wait
	}
	return next, 0
}

var notOutputName = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// MetricOutputName is the output a metric's final value goes to: metric-<name> with every run of
// characters an Argo parameter or a Tekton result name cannot hold made one dash, and no
// leading or trailing dash or underscore. False when nothing of the name is left.
func MetricOutputName(name string) (string, bool) {
	n := strings.Trim(notOutputName.ReplaceAllString(name, "-"), "-_")
	if len(n) > 63 {
		n = strings.TrimRight(n[:63], "-_")
	}
	if !resultKeyName.MatchString(n) {
		return "", false
	}
	return MetricPrefix + n, true
}

// IsMetricOutput reports whether name is a metric-<name> output a step may declare.
func IsMetricOutput(name string) bool {
	key, ok := strings.CutPrefix(name, MetricPrefix)
	return ok && resultKeyName.MatchString(key)
}

// metricOutputs adds metric-<name> for each metric whose output name is its own; metrics whose
// names become the same output are refused by name (metricCollisions says which), never one
// silently kept.
func (o Observation) metricOutputs(out map[string]string) {
	byOutput := map[string][]string{}
	for n := range o.Metrics {
		if on, ok := MetricOutputName(n); ok {
			byOutput[on] = append(byOutput[on], n)
		}
	}
	for on, names := range byOutput {
		if len(names) == 1 {
			out[on] = o.Metrics[names[0]]
		}
	}
}

// metricCollisions says which metrics got no output of their own, and why.
func (o Observation) metricCollisions() string {
	byOutput := map[string][]string{}
	var unnamed []string
	for _, n := range o.metricNames() {
		on, ok := MetricOutputName(n)
		if !ok {
			unnamed = append(unnamed, fmt.Sprintf("%q", n))
			continue
		}
		byOutput[on] = append(byOutput[on], fmt.Sprintf("%q", n))
	}
	var notes []string
	for _, on := range sortedKeys(byOutput) {
		if names := byOutput[on]; len(names) > 1 {
			notes = append(notes, fmt.Sprintf("metrics %s all become output %s, so none is an output: rename all but one", strings.Join(names, ", "), on))
		}
	}
	if len(unnamed) > 0 {
		notes = append(notes, fmt.Sprintf("metrics %s have no letter or digit to name an output: rename them", strings.Join(unnamed, ", ")))
	}
	return strings.Join(notes, "; ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// RunningMessage is what a running job says, its progress line included: the message Observe
// writes when every node runs.
func (o Observation) RunningMessage() string {
	msg := fmt.Sprintf("TrainJob %s is running: %d/%d nodes", o.Name, o.RunningNodes, o.NumNodes)
	if note := o.ResumeNote(); note != "" {
		msg += "; " + note
	}
	if o.ProgressOff {
		msg += "; " + ProgressOffNote
	}
	if p := o.ProgressLine(); p != "" {
		msg += progressSep + p
	}
	return msg
}

// EnvStatusURL is the status server's URL the Trainer's TrainJobStatus plugin injects into the
// trainer containers when its feature gate is on; no such env in a running node means it is off.
const EnvStatusURL = "KUBEFLOW_TRAINER_SERVER_URL"

// ProgressOffNote says why a step shows no progress and how to turn it on.
const ProgressOffNote = "progress reporting is off on this cluster: the Trainer injected no " + EnvStatusURL +
	" into the training pods, so its TrainJobStatus feature gate is off, or it predates the gate (Trainer v2.2+: --feature-gates=TrainJobStatus=true" +
	" on its controller, or featureGates.TrainJobStatus: true in its config; Helm: manager.config.featureGates.TrainJobStatus=true)"

// progressOff reports whether the trainer step's pods show the gate off: the pods the Trainer's
// TrainJobStatus plugin injects EnvStatusURL into (its runtime's trainer step: the node job, or
// the launcher on MPI runtimes, whose nodes never get it) have their containers (a trimmed pod
// keeps their names and this env's name, TrimPod), none has it, and nothing was reported. The
// pods do not carry the step's ancestor label (the Job template does), so an MPI job is known
// by a launcher pod, or by its framework before the launcher exists (it waits for the nodes);
// until then it is not judged: unknown is never said as off.
func progressOff(tj *trainer.TrainJob, pods []corev1.Pod) bool {
	if tj.Status.TrainerStatus != nil {
		return false
	}
	step := NodeJob
	if mpiFrameworks[tj.Labels[LabelFramework]] {
		step = LauncherJob
	}
	for _, p := range pods {
		if HasStatusServer(&p) {
			return false
		}
		if p.Labels[LabelReplicatedJob] == LauncherJob {
			step = LauncherJob
		}
	}
	seen := false
	for _, p := range pods {
		if p.Labels[LabelReplicatedJob] == step && len(p.Spec.Containers) > 0 {
			seen = true
		}
	}
	return seen
}

// mpiFrameworks are the stock runtimes' frameworks whose trainer step is an MPI launcher.
var mpiFrameworks = map[string]bool{"deepspeed": true, "mlx": true, "mpi": true}

// HasStatusServer reports whether a container of pod got the status server's URL.
func HasStatusServer(pod *corev1.Pod) bool {
	for _, c := range pod.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == EnvStatusURL {
				return true
			}
		}
	}
	return false
}
