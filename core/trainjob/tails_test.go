package trainjob

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// podLogs is a LogSource whose every pod printed its own name, and which counts its reads.
type podLogs struct {
	mu    sync.Mutex
	reads map[string]int
}

func (l *podLogs) Tail(_ context.Context, _, pod, _ string, _ int64) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reads[pod]++
	return "log of " + pod, nil
}

// Two failed TrainJobs of one namespace whose verdicts name no pod (the snapshot had none): each
// message gets its own job's tail, which blame picked among the job's pods, and a second look at
// either reads no log again. Naming the pod read, a verdict finds it too.
func TestTailsRememberEachJobsOwnTail(t *testing.T) {
	scheme, err := NewScheme()
	require.NoError(t, err)
	var pods []client.Object
	for _, job := range []string{"job-a", "job-b"} {
		p := pod(job, NodeJob, 0, corev1.PodFailed)
		p.Namespace = "ns"
		pods = append(pods, &p)
	}
	logs := &podLogs{reads: map[string]int{}}
	tailer := Tailer{Logs: logs, Pods: fake.NewClientBuilder().WithScheme(scheme).WithObjects(pods...).Build()}
	failed := func(job string) Verdict {
		return Verdict{Observation: Observation{Name: job, Namespace: "ns", Phase: PhaseFailed, Message: job + " failed"}}
	}
	tails := NewTails()

	for range 2 {
		for _, job := range []string{"job-a", "job-b"} {
			obs := tails.WithTail(t.Context(), tailer, failed(job))
			assert.Equal(t, "log of "+job+"-node-0", obs.LogTail)
			assert.Equal(t, job+"-node-0", obs.FailedPod)
			assert.Contains(t, obs.Message, "last lines of "+job+"-node-0:")
		}
	}
	named := failed("job-a")
	named.TailPod = "job-a-node-0"
	assert.Equal(t, "log of job-a-node-0", tails.WithTail(t.Context(), tailer, named).LogTail)
	assert.Equal(t, map[string]int{"job-a-node-0": 1, "job-b-node-0": 1}, logs.reads, "each pod's log read once")
}
