package trainjob

import (
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/trainstep/trainstep/core/runtimes/stock"
	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainers"
)

// hangTimeout counts only from a report of the function's: the checkpoint name the command
// script posts as a resumed run starts is not one, so a resumed attempt whose function never
// reports (a Hugging Face Trainer without the callback, TorchTune, a plain loop) is never hung;
// every report() is one, a bare heartbeat included (it carries report()'s count).
func TestHangCountsOnlyTheFunctionsReports(t *testing.T) {
	started := t0.Add(2 * time.Minute)
	resumed := trainer.Metric{Name: trainers.ResumedFromMetric, Value: "step-400"}
	count := trainer.Metric{Name: trainers.ReportsMetric, Value: "1"}
	posted := func(ts trainer.TrainerStatus) *trainer.TrainJob {
		tj := startedJob(started)
		ts.LastUpdatedTime = metav1.NewTime(t0.Add(5 * time.Minute))
		tj.Status.TrainerStatus = &ts
		return tj
	}
	hangAtT := t0.Add(35 * time.Minute)
	for name, tc := range map[string]struct {
		status trainer.TrainerStatus
		hung   bool
	}{
		"resumed, the function never reported: never hung":           {status: trainer.TrainerStatus{Metrics: []trainer.Metric{resumed}}},
		"resumed, then a bare report(): hung when it stops":          {status: trainer.TrainerStatus{Metrics: []trainer.Metric{count, resumed}}, hung: true},
		"resumed, then a report with a metric: hung when it stops":   {status: trainer.TrainerStatus{Metrics: []trainer.Metric{{Name: "loss", Value: "0.3"}, count, resumed}}, hung: true},
		"progress alone (the SDK's update_trainjob_status): hung":    {status: trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](40)}, hung: true},
		"time left alone: hung":                                      {status: trainer.TrainerStatus{EstimatedRemainingSeconds: ptr.To[int32](600)}, hung: true},
		"a metric of the Hugging Face callback's, no progress: hung": {status: trainer.TrainerStatus{Metrics: []trainer.Metric{{Name: "train_loss", Value: "0.3"}}}, hung: true},
		"an empty status (a heartbeat posted by hand): hung":         {status: trainer.TrainerStatus{}, hung: true},
	} {
		t.Run(name, func(t *testing.T) {
			d := Deadlines{HangTimeout: 30 * time.Minute}
			before := Decide(Snapshot{TrainJob: posted(tc.status), Pods: bothRunning, Now: t0.Add(10 * time.Minute)}, d)
			assert.Equal(t, PhaseRunning, before.Phase, before.Message)
			after := Decide(Snapshot{TrainJob: posted(tc.status), Pods: bothRunning, Now: t0.Add(10 * time.Hour)}, d)
			if !tc.hung {
				assert.True(t, before.Wake.IsZero(), "no hang to wake for: %v", before.Wake)
				assert.Equal(t, PhaseRunning, after.Phase, after.Message)
				assert.False(t, after.Delete)
				return
			}
			assert.Equal(t, hangAtT, before.Wake, "looked at again when it would be hung")
			assert.Equal(t, PhaseFailed, after.Phase)
			assert.Equal(t, ReasonHung, after.Reason)
			assert.True(t, after.Delete)
		})
	}
}

// trainstep's own metrics (report()'s count, the checkpoint resumed from) are no metrics of the
// function's: not in the message, the metrics or an output of their own.
func TestTrainstepsOwnMetricsAreNoMetrics(t *testing.T) {
	tj := startedJob(t0)
	tj.Status.TrainerStatus = &trainer.TrainerStatus{LastUpdatedTime: metav1.NewTime(t0), Metrics: []trainer.Metric{
		{Name: "loss", Value: "0.3"}, {Name: trainers.ReportsMetric, Value: "7"}, {Name: trainers.ResumedFromMetric, Value: "step-400"}}}
	o := Observe(tj, bothRunning)
	assert.Equal(t, map[string]string{"loss": "0.3"}, o.Metrics)
	assert.Equal(t, []string{"loss"}, o.MetricOrder)
	assert.Equal(t, "step-400", o.ResumedFrom)
	assert.NotContains(t, o.Message, "trainstep.")
	outs := o.Outputs()
	assert.JSONEq(t, `{"loss":"0.3"}`, outs["metrics"])
	for name := range outs {
		assert.NotContains(t, name, "trainstep", "an output of trainstep's own metric")
	}
}

// A step with hangTimeout is told at plan time when it can fire: never on a Trainer with no
// status.trainerStatus (before v2.2), else only from the first report, with the gate on.
func TestPlanSaysWhenHangTimeoutCanFire(t *testing.T) {
	v21 := API{PodMechanism: PodTemplateOverrides, MaxCommandItem: CommandItemV22, Source: "test v2.1"}
	v22 := API{PodMechanism: PodRuntimePatches, ActiveDeadline: true, MaxCommandItem: CommandItemV22, Source: "test v2.2"}
	const hangs = "framework: torch\ntrainer: {func: \"def train(): pass\"}\nhangTimeout: 30m\n"
	for name, tc := range map[string]struct {
		spec string
		api  API
		want []string
	}{
		"before v2.2: never": {spec: hangs, api: v21, want: []string{
			"hangTimeout never fires here: the installed Trainer (test v2.1) has no status.trainerStatus (Trainer v2.2+)"}},
		"v2.2+: from the first report, with the gate on": {spec: hangs, api: v22, want: []string{
			"hangTimeout counts only from the job's first progress report", "TrainJobStatus feature gate is on (off by default)", "a job that never reports is never hung"}},
		"no cluster: as on v2.3":       {spec: hangs, api: AssumedAPI, want: []string{"hangTimeout counts only from the job's first progress report"}},
		"no hangTimeout: nothing said": {spec: "framework: torch\ntrainer: {func: \"def train(): pass\"}\n", api: v21},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := step.Parse([]byte(tc.spec))
			require.NoError(t, err)
			p, err := (&Planner{Trainers: trainers.Builtin(), Runtimes: stock.Source{}, API: &tc.api}).Plan(t.Context(), s, "team")
			require.NoError(t, err)
			if tc.want == nil {
				assert.Empty(t, p.Warnings)
				return
			}
			require.Len(t, p.Warnings, 1)
			for _, w := range tc.want {
				assert.Contains(t, p.Warnings[0], w)
			}
		})
	}
}

// A running step with hangTimeout whose pods show the Trainer's TrainJobStatus gate off says
// that its hangTimeout never fires there; with the gate on, or no hangTimeout, it says nothing
// of it.
func TestARunningStepSaysWhenHangTimeoutCannotFire(t *testing.T) {
	withContainer := func(p corev1.Pod, env ...corev1.EnvVar) corev1.Pod {
		p.Spec.Containers = []corev1.Container{{Name: NodeContainer, Env: env}}
		return p
	}
	off := []corev1.Pod{withContainer(runningNode(0, t0)), withContainer(runningNode(1, t0))}
	on := []corev1.Pod{withContainer(runningNode(0, t0), corev1.EnvVar{Name: EnvStatusURL}), withContainer(runningNode(1, t0), corev1.EnvVar{Name: EnvStatusURL})}
	for name, tc := range map[string]struct {
		pods []corev1.Pod
		hang time.Duration
		says bool
	}{
		"the gate off, hangTimeout set": {pods: off, hang: 30 * time.Minute, says: true},
		"the gate on":                   {pods: on, hang: 30 * time.Minute},
		"no hangTimeout":                {pods: off},
	} {
		t.Run(name, func(t *testing.T) {
			v := Decide(Snapshot{TrainJob: startedJob(t0), Pods: tc.pods, Now: t0.Add(time.Minute)}, Deadlines{HangTimeout: tc.hang})
			require.Equal(t, PhaseRunning, v.Phase, v.Message)
			if tc.says {
				assert.Contains(t, v.Message, ProgressOffNote+"; "+HangOffNote)
				return
			}
			assert.NotContains(t, v.Message, HangOffNote)
		})
	}
}
