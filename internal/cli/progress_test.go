package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/ptr"

	"github.com/trainstep/trainstep/core/trainjob"
)

func running(nodes, progress int32, metrics ...string) trainjob.Observation {
	o := trainjob.Observation{Name: "j", Phase: trainjob.PhaseRunning, NumNodes: 2, RunningNodes: nodes, Progress: ptr.To(progress)}
	if len(metrics) > 0 {
		o.Metrics = map[string]string{}
		for i := 0; i+1 < len(metrics); i += 2 {
			o.Metrics[metrics[i]] = metrics[i+1]
			o.MetricOrder = append(o.MetricOrder, metrics[i])
		}
	}
	o.Message = o.RunningMessage()
	return o
}

// Off a terminal: a change of state prints at once; a change of progress alone is held until
// progressEvery has passed (here never), the latest one winning, and printed at the end.
func TestProgressViewThrottlesProgressOffATerminal(t *testing.T) {
	var out bytes.Buffer
	v := newProgressView(&out)
	v.every = time.Hour
	v.update(running(2, 10, "loss", "0.5"))
	v.update(running(2, 11, "loss", "0.4"))
	v.update(running(2, 12, "loss", "0.3"))
	assert.Equal(t, "trainstep: Running: TrainJob j is running: 2/2 nodes · 10% · loss=0.5\n", out.String(), "progress alone is held")
	v.update(running(1, 12, "loss", "0.3"))
	assert.Contains(t, out.String(), "trainstep: Running: TrainJob j is running: 1/2 nodes · 12% · loss=0.3\n", "a new state prints at once")
	v.update(running(1, 13, "loss", "0.2"))
	v.done()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	assert.Equal(t, []string{
		"trainstep: Running: TrainJob j is running: 2/2 nodes · 10% · loss=0.5",
		"trainstep: Running: TrainJob j is running: 1/2 nodes · 12% · loss=0.3",
		"trainstep: Running: TrainJob j is running: 1/2 nodes · 13% · loss=0.2",
	}, lines, "the held line is printed at the end")
}

func TestStatusLine(t *testing.T) {
	for _, tc := range []struct {
		name  string
		obs   trainjob.Observation
		width int
		want  string
	}{
		{"bar", running(2, 42, "loss", "0.31", "acc", "0.88"), 100, "[████████░░░░░░░░░░░░] 42% · loss=0.31 acc=0.88 · 2/2 nodes running"},
		{"no progress yet", trainjob.Observation{Phase: trainjob.PhaseRunning, NumNodes: 2, RunningNodes: 1}, 100, "Running · 1/2 nodes running"},
		{"cut to the terminal, its last column left free", running(2, 100), 20, "[█████████████████…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, statusLine(tc.obs, tc.width))
		})
	}
}
