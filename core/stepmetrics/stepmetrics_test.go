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
	e := New("trainstep_test")
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.Collectors()...)

	e.Observe(trainjob.Observation{Namespace: "team-a", Phase: trainjob.PhaseSucceeded, StartTime: at(0), CompletionTime: at(3600),
		QueueWait: &wait, TrainingStart: at(1800), NumNodes: 2, Accelerators: 4, Lost: &lost})
	e.Observe(trainjob.Observation{Namespace: "team-a", Phase: trainjob.PhaseFailed, Failure: trainjob.Classified(trainjob.ClassOOM),
		StartTime: at(0), CompletionTime: at(60), TrainingStart: at(10), NumNodes: 1})
	// Refused before any TrainJob: counted, with no cost.
	e.Observe(trainjob.Observation{Namespace: "team-b", Phase: trainjob.PhaseFailed, Failure: trainjob.Classified(trainjob.ClassInvalid)})

	want := `
# HELP trainstep_test_step_gpu_hours_total Accelerator hours ended steps trained for (nodes x accelerators per node x training time), by namespace and failure class.
# TYPE trainstep_test_step_gpu_hours_total counter
trainstep_test_step_gpu_hours_total{failure_class="none",namespace="team-a"} 4
# HELP trainstep_test_step_seconds_total Seconds ended steps spent, by namespace, failure class and bucket: queued, initializing, training, lost (earlier attempts).
# TYPE trainstep_test_step_seconds_total counter
trainstep_test_step_seconds_total{bucket="initializing",failure_class="none",namespace="team-a"} 1780
trainstep_test_step_seconds_total{bucket="initializing",failure_class="oom",namespace="team-a"} 10
trainstep_test_step_seconds_total{bucket="lost",failure_class="none",namespace="team-a"} 30
trainstep_test_step_seconds_total{bucket="queued",failure_class="none",namespace="team-a"} 20
trainstep_test_step_seconds_total{bucket="training",failure_class="none",namespace="team-a"} 1800
trainstep_test_step_seconds_total{bucket="training",failure_class="oom",namespace="team-a"} 50
# HELP trainstep_test_steps_ended_total Steps that ended, by namespace, phase and failure class (none when it succeeded).
# TYPE trainstep_test_steps_ended_total counter
trainstep_test_steps_ended_total{failure_class="invalid",namespace="team-b",phase="Failed"} 1
trainstep_test_steps_ended_total{failure_class="none",namespace="team-a",phase="Succeeded"} 1
trainstep_test_steps_ended_total{failure_class="oom",namespace="team-a",phase="Failed"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want)))
}

// A step the cache served trained nothing: a hit's outputs are those of the job that trained
// (its seconds and GPU-hours, already counted when it ended), and a follower's job is counted by
// the step that made it. Each still counts as a step that ended.
func TestEndedCountsACachedStepOnce(t *testing.T) {
	at := func(s int) *time.Time { v := time.Unix(1000+int64(s), 0); return &v }
	e := New("trainstep_test")
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.Collectors()...)
	trained := trainjob.Observation{Namespace: "team-a", Name: "made", Phase: trainjob.PhaseSucceeded, StartTime: at(0), CompletionTime: at(3600),
		TrainingStart: at(0), NumNodes: 2, Accelerators: 4, CacheKey: "k"}
	e.Observe(trained)
	follower := trained
	follower.Cached = &trainjob.Cached{From: "made"}
	e.Observe(follower)
	hit := trainjob.Observation{Namespace: "team-a", Phase: trainjob.PhaseSucceeded, CacheKey: "k",
		Cached: &trainjob.Cached{From: "made", Outputs: trained.Outputs()}}
	e.Observe(hit)

	want := `
# HELP trainstep_test_step_gpu_hours_total Accelerator hours ended steps trained for (nodes x accelerators per node x training time), by namespace and failure class.
# TYPE trainstep_test_step_gpu_hours_total counter
trainstep_test_step_gpu_hours_total{failure_class="none",namespace="team-a"} 8
# HELP trainstep_test_step_seconds_total Seconds ended steps spent, by namespace, failure class and bucket: queued, initializing, training, lost (earlier attempts).
# TYPE trainstep_test_step_seconds_total counter
trainstep_test_step_seconds_total{bucket="training",failure_class="none",namespace="team-a"} 3600
# HELP trainstep_test_steps_ended_total Steps that ended, by namespace, phase and failure class (none when it succeeded).
# TYPE trainstep_test_steps_ended_total counter
trainstep_test_steps_ended_total{failure_class="none",namespace="team-a",phase="Succeeded"} 3
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want)))
}
