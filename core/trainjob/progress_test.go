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
)

func TestProgressLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		ts   *trainer.TrainerStatus
		want string
	}{
		{"nothing reported", nil, ""},
		{"everything", &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](42), EstimatedRemainingSeconds: ptr.To[int32](720),
			Metrics: []trainer.Metric{{Name: "loss", Value: "0.31"}, {Name: "acc", Value: "0.88"}}}, "42% · 12m left · loss=0.31 acc=0.88"},
		{"no time left at 100%", &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](100), EstimatedRemainingSeconds: ptr.To[int32](0)}, "100%"},
		{"hours", &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](3), EstimatedRemainingSeconds: ptr.To[int32](3*3600 + 5*60 + 10)}, "3% · 3h05m left"},
		{"seconds", &trainer.TrainerStatus{EstimatedRemainingSeconds: ptr.To[int32](45)}, "45s left"},
		{"metrics only", &trainer.TrainerStatus{Metrics: []trainer.Metric{{Name: "b", Value: "2"}, {Name: "a", Value: "1"}}}, "b=2 a=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "job"}}
			tj.Status.TrainerStatus = tc.ts
			assert.Equal(t, tc.want, Observe(tj, nil).ProgressLine())
		})
	}
}

func TestMetricOutputs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		metrics []trainer.Metric
		want    map[string]string
		note    string
	}{
		{"plain", []trainer.Metric{{Name: "loss", Value: "0.1"}, {Name: "learning_rate", Value: "3e-4"}},
			map[string]string{"metric-loss": "0.1", "metric-learning_rate": "3e-4"}, ""},
		{"made valid", []trainer.Metric{{Name: "eval/f1", Value: "0.7"}, {Name: "train.loss ", Value: "0.2"}},
			map[string]string{"metric-eval-f1": "0.7", "metric-train-loss": "0.2"}, ""},
		{"collision refused by name", []trainer.Metric{{Name: "eval/f1", Value: "0.7"}, {Name: "eval.f1", Value: "0.8"}, {Name: "ok", Value: "1"}},
			map[string]string{"metric-ok": "1"}, `metrics "eval/f1", "eval.f1" all become output metric-eval-f1, so none is an output: rename all but one`},
		{"nothing left of the name", []trainer.Metric{{Name: "///", Value: "1"}},
			map[string]string{}, `metrics "///" have no letter or digit to name an output: rename them`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "job"}}
			tj.Status.TrainerStatus = &trainer.TrainerStatus{Metrics: tc.metrics}
			tj.Status.Conditions = []metav1.Condition{{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "AllJobsCompleted", Message: "done"}}
			o := Observe(tj, nil)
			got := map[string]string{}
			for k, v := range o.Outputs() {
				if IsMetricOutput(k) {
					got[k] = v
				}
			}
			assert.Equal(t, tc.want, got)
			if tc.note == "" {
				assert.Equal(t, "done", o.Message)
			} else {
				assert.Equal(t, "done; "+tc.note, o.Message)
			}
		})
	}
}

func TestThrottleProgress(t *testing.T) {
	t0 := time.Unix(1000, 0)
	run := "TrainJob j is running: 2/2 nodes"
	for _, tc := range []struct {
		name      string
		prev      string
		next      string
		elapsed   time.Duration
		want      string
		wantAfter time.Duration
	}{
		{"progress alone, too soon: kept", run + " · 10%", run + " · 11%", 3 * time.Second, run + " · 10%", 7 * time.Second},
		{"progress alone, in time: written", run + " · 10%", run + " · 11%", 10 * time.Second, run + " · 11%", 0},
		{"first progress: a change of its own", run, run + " · 1%", time.Second, run + " · 1%", 0},
		{"another state: written at once", run + " · 10%", "TrainJob j is running: 1/2 nodes · 10%", time.Second, "TrainJob j is running: 1/2 nodes · 10%", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, after := ThrottleProgress(tc.prev, t0, tc.next, t0.Add(tc.elapsed), ProgressEvery)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.wantAfter, after)
		})
	}
}

func TestProgressOffIsSaidFromTheNodePods(t *testing.T) {
	withEnv := func(p corev1.Pod, env ...string) corev1.Pod {
		c := corev1.Container{Name: NodeContainer}
		for _, e := range env {
			c.Env = append(c.Env, corev1.EnvVar{Name: e, Value: "v"})
		}
		p.Spec.Containers = []corev1.Container{c}
		return p
	}
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "job", Labels: map[string]string{LabelNumNodes: "1"}}}
	for _, tc := range []struct {
		name   string
		pods   []corev1.Pod
		status *trainer.TrainerStatus
		off    bool
	}{
		{"no env: the gate is off", []corev1.Pod{withEnv(pod("job", NodeJob, 0, corev1.PodRunning), "PET_NNODES")}, nil, true},
		{"the env: on", []corev1.Pod{withEnv(pod("job", NodeJob, 0, corev1.PodRunning), EnvStatusURL)}, nil, false},
		{"no containers seen: unknown, not off", []corev1.Pod{pod("job", NodeJob, 0, corev1.PodRunning)}, nil, false},
		{"MPI: the nodes never get it, the launcher does", []corev1.Pod{withEnv(pod("job", NodeJob, 0, corev1.PodRunning)),
			withEnv(pod("job", LauncherJob, 0, corev1.PodRunning), EnvStatusURL)}, nil, false},
		{"MPI: a launcher without it: off", []corev1.Pod{withEnv(pod("job", NodeJob, 0, corev1.PodRunning)),
			withEnv(pod("job", LauncherJob, 0, corev1.PodRunning))}, nil, true},
		{"a status was written: on", []corev1.Pod{withEnv(pod("job", NodeJob, 0, corev1.PodRunning))}, &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](1)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := tj.DeepCopy()
			j.Status.TrainerStatus = tc.status
			o := Observe(j, tc.pods)
			assert.Equal(t, tc.off, o.ProgressOff)
			if tc.off {
				assert.Contains(t, o.Message, " nodes; "+ProgressOffNote)
			} else {
				assert.NotContains(t, o.Message, "progress reporting is off")
			}
		})
	}
}

// An MPI job's launcher waits for its nodes: before it exists, nodes without the env say nothing.
func TestProgressOffWaitsForTheMPILauncher(t *testing.T) {
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "job", Labels: map[string]string{LabelNumNodes: "1", LabelFramework: "deepspeed"}}}
	node := pod("job", NodeJob, 0, corev1.PodRunning)
	node.Spec.Containers = []corev1.Container{{Name: NodeContainer}}
	assert.False(t, Observe(tj, []corev1.Pod{node}).ProgressOff)
}

// A node restarted while progress is reported: the restart is said before the progress line, so
// it is part of the job's state (WithoutProgress keeps it: a terminal prints it, Tekton does not
// hold it back as progress) and the progress line stays last.
func TestTroubleGoesBeforeTheProgressLine(t *testing.T) {
	tj := startedJob(t0)
	tj.Status.TrainerStatus = &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](42), Metrics: []trainer.Metric{{Name: "loss", Value: "0.31"}}}
	restarted := runningNode(1, t0)
	restarted.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: NodeContainer, RestartCount: 1,
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}
	v := Decide(Snapshot{TrainJob: tj, Pods: []corev1.Pod{runningNode(0, t0), restarted}, Now: t0.Add(time.Hour)}, Deadlines{})
	require.Equal(t, PhaseRunning, v.Phase)
	assert.Equal(t, "TrainJob job is running: 2/2 nodes; node 1 (pod job-node-1) restarted: OOMKilled (exit code 137), attempt 2 · 42% · loss=0.31", v.Message)
	assert.Equal(t, "TrainJob job is running: 2/2 nodes; node 1 (pod job-node-1) restarted: OOMKilled (exit code 137), attempt 2", WithoutProgress(v.Message))
	assert.True(t, v.Trouble)

	// The throttle lets the restart through at once: it is not a change of progress alone.
	before := "TrainJob job is running: 2/2 nodes · 41% · loss=0.33"
	got, wait := ThrottleProgress(before, t0.Add(time.Hour-time.Second), v.Message, t0.Add(time.Hour), ProgressEvery)
	assert.Equal(t, v.Message, got)
	assert.Zero(t, wait)
}
