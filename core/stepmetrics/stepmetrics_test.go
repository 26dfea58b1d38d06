package stepmetrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/core/trainjob"
)

func TestEndedCountsCostByClass(t *testing.T) {
	at := func(s int) *time.Time { v := time.Unix(1000+int64(s), 0); return &v }
	wait, lost := 20*time.Second, 30*time.Second
	e := New("test")
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.Collectors()...)

	e.Observe(trainjob.Observation{Namespace: "team-a", Phase: trainjob.PhaseSucceeded, StartTime: at(0), CompletionTime: at(3600),
		QueueWait: &wait, TrainingStart: at(1800), NumNodes: 2, Accelerators: 4, Lost: &lost}, true)
	e.Observe(trainjob.Observation{Namespace: "team-a", Phase: trainjob.PhaseFailed, Failure: trainjob.Classified(trainjob.ClassOOM),
		StartTime: at(0), CompletionTime: at(60), TrainingStart: at(10), NumNodes: 1}, false)
	// Refused before any TrainJob: counted, with no cost.
	e.Observe(trainjob.Observation{Namespace: "team-b", Phase: trainjob.PhaseFailed, Failure: trainjob.Classified(trainjob.ClassInvalid)}, false)

	want := `
# HELP trainstep_step_gpu_seconds_total Accelerator seconds ended steps trained for (nodes x accelerators per node x training time; gpu-hours x 3600), by namespace and failure class.
# TYPE trainstep_step_gpu_seconds_total counter
trainstep_step_gpu_seconds_total{face="test",failure_class="none",namespace="team-a"} 14400
# HELP trainstep_step_retries_total Ended steps that were a retry of an earlier attempt by the engine (Argo's retryStrategy, Tekton's retries), by namespace.
# TYPE trainstep_step_retries_total counter
trainstep_step_retries_total{face="test",namespace="team-a"} 1
# HELP trainstep_step_seconds_total Seconds ended steps spent, by namespace, failure class and bucket: queued, initializing, training, lost (earlier attempts).
# TYPE trainstep_step_seconds_total counter
trainstep_step_seconds_total{bucket="initializing",face="test",failure_class="none",namespace="team-a"} 1780
trainstep_step_seconds_total{bucket="initializing",face="test",failure_class="oom",namespace="team-a"} 10
trainstep_step_seconds_total{bucket="lost",face="test",failure_class="none",namespace="team-a"} 30
trainstep_step_seconds_total{bucket="queued",face="test",failure_class="none",namespace="team-a"} 20
trainstep_step_seconds_total{bucket="training",face="test",failure_class="none",namespace="team-a"} 1800
trainstep_step_seconds_total{bucket="training",face="test",failure_class="oom",namespace="team-a"} 50
# HELP trainstep_steps_ended_total Steps that ended, by namespace, phase and failure class (none when it succeeded).
# TYPE trainstep_steps_ended_total counter
trainstep_steps_ended_total{face="test",failure_class="invalid",namespace="team-b",phase="Failed"} 1
trainstep_steps_ended_total{face="test",failure_class="none",namespace="team-a",phase="Succeeded"} 1
trainstep_steps_ended_total{face="test",failure_class="oom",namespace="team-a",phase="Failed"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want)))
}

// A step the cache served trained nothing: a hit's outputs are those of the job that trained
// (its seconds and GPU-hours, already counted when it ended), and a follower's job is counted by
// the step that made it. Each still counts as a step that ended.
func TestEndedCountsACachedStepOnce(t *testing.T) {
	at := func(s int) *time.Time { v := time.Unix(1000+int64(s), 0); return &v }
	e := New("test")
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.Collectors()...)
	trained := trainjob.Observation{Namespace: "team-a", Name: "made", Phase: trainjob.PhaseSucceeded, StartTime: at(0), CompletionTime: at(3600),
		TrainingStart: at(0), NumNodes: 2, Accelerators: 4, CacheKey: "k"}
	e.Observe(trained, false)
	follower := trained
	follower.Cached = &trainjob.Cached{From: "made"}
	e.Observe(follower, false)
	hit := trainjob.Observation{Namespace: "team-a", Phase: trainjob.PhaseSucceeded, CacheKey: "k",
		Cached: &trainjob.Cached{From: "made", Outputs: trained.Outputs()}}
	e.Observe(hit, false)

	want := `
# HELP trainstep_step_cache_hits_total Ended steps the step cache served (a stored success, or another step's TrainJob they followed), by namespace.
# TYPE trainstep_step_cache_hits_total counter
trainstep_step_cache_hits_total{face="test",namespace="team-a"} 2
# HELP trainstep_step_gpu_seconds_total Accelerator seconds ended steps trained for (nodes x accelerators per node x training time; gpu-hours x 3600), by namespace and failure class.
# TYPE trainstep_step_gpu_seconds_total counter
trainstep_step_gpu_seconds_total{face="test",failure_class="none",namespace="team-a"} 28800
# HELP trainstep_step_seconds_total Seconds ended steps spent, by namespace, failure class and bucket: queued, initializing, training, lost (earlier attempts).
# TYPE trainstep_step_seconds_total counter
trainstep_step_seconds_total{bucket="training",face="test",failure_class="none",namespace="team-a"} 3600
# HELP trainstep_steps_ended_total Steps that ended, by namespace, phase and failure class (none when it succeeded).
# TYPE trainstep_steps_ended_total counter
trainstep_steps_ended_total{face="test",failure_class="none",namespace="team-a",phase="Succeeded"} 3
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want)))
}

// Outputs that do not say the step ended (an Argo node failed without trainstep's verdict, its
// last reply Running) count nothing: their phase is no terminal one, and no label value.
func TestCountSkipsAStepThatHasNotEnded(t *testing.T) {
	e := New("test")
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.Collectors()...)
	for _, phase := range []string{"", "Running", "Pending", "Omitted"} {
		e.Count("team-a", map[string]string{trainjob.OutPhase: phase, trainjob.OutTraining: "60"}, true)
	}
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	require.Zero(t, n)
}
