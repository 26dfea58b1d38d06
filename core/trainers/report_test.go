package trainers

import (
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// statusServer stands in for the Trainer's status server: it records each request's
// Authorization header and trainerStatus, and answers code.
type statusServer struct {
	mu   sync.Mutex
	auth []string
	got  []map[string]any
}

func (s *statusServer) requests() ([]string, []map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.auth, s.got
}

// reportEnv starts a TLS server answering code and returns the env the Trainer would inject
// for it: its URL, a CA file that verifies it and a token file.
func reportEnv(t *testing.T, code int) (*statusServer, []string) {
	t.Helper()
	rec := &statusServer{}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body struct {
			TrainerStatus map[string]any `json:"trainerStatus"`
		}
		_ = json.Unmarshal(b, &body)
		delete(body.TrainerStatus, "lastUpdatedTime")
		rec.mu.Lock()
		rec.auth = append(rec.auth, r.Header.Get("Authorization"))
		rec.got = append(rec.got, body.TrainerStatus)
		rec.mu.Unlock()
		w.WriteHeader(code)
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600))
	token := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(token, []byte("the-token\n"), 0o600))
	return rec, []string{
		"KUBEFLOW_TRAINER_SERVER_URL=" + srv.URL + "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/j/status",
		"KUBEFLOW_TRAINER_SERVER_CA_CERT=" + ca, "KUBEFLOW_TRAINER_SERVER_TOKEN=" + token,
	}
}

func TestReportPostsAsTheSDKDoes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		src      string
		env      []string
		code     int
		want     []map[string]any
		wantLog  string
		wantOnce bool
	}{
		{
			name: "posts, holds a call within 5 s and posts it at exit",
			src:  "def train():\n    report(progress=10, eta=60, loss=0.5)\n    report(progress=20, loss=0.4, acc=0.9)\n",
			code: http.StatusOK,
			want: []map[string]any{
				counted(1, map[string]any{"progressPercentage": 10.0, "estimatedRemainingSeconds": 60.0, "metrics": []any{map[string]any{"name": "loss", "value": "0.5"}}}),
				counted(2, map[string]any{"progressPercentage": 20.0, "metrics": []any{map[string]any{"name": "loss", "value": "0.4"}, map[string]any{"name": "acc", "value": "0.9"}}}),
			},
		},
		{
			name: "100% always goes at once, and the held one is dropped for it",
			src:  "def train():\n    report(progress=50)\n    report(progress=60)\n    report(progress=100, loss=0.1)\n",
			code: http.StatusOK,
			want: []map[string]any{
				counted(1, map[string]any{"progressPercentage": 50.0}),
				counted(3, map[string]any{"progressPercentage": 100.0, "metrics": []any{map[string]any{"name": "loss", "value": "0.1"}}}),
			},
		},
		{
			name: "only rank 0 posts",
			src:  "def train():\n    report(progress=10)\n",
			env:  []string{"RANK=1"},
			code: http.StatusOK,
		},
		{
			name:    "a refusal is logged, never raised",
			src:     "def train():\n    report(progress=10)\n",
			code:    http.StatusForbidden,
			want:    []map[string]any{counted(1, map[string]any{"progressPercentage": 10.0})},
			wantLog: "trainstep: report(): progress not reported: HTTP Error 403",
		},
		{
			name: "a report of the function's own is left alone",
			src:  "def report(**kw):\n    print('mine', kw)\n\ndef train():\n    report(progress=10)\n",
			code: http.StatusOK, wantLog: "mine {'progress': 10}",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, env := reportEnv(t, tc.code)
			out, _, err := runResult(t, tc.src, append(env, tc.env...)...)
			require.NoError(t, err, out)
			auth, got := rec.requests()
			assert.Equal(t, tc.want, got, out)
			for _, a := range auth {
				assert.Equal(t, "Bearer the-token", a)
			}
			assert.Contains(t, out, tc.wantLog)
		})
	}
}

// counted is ts as report()'s post number n carries it: its metrics, then report()'s count.
func counted(n int, ts map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range ts {
		out[k] = v
	}
	ms, _ := ts["metrics"].([]any)
	out["metrics"] = append(append([]any{}, ms...), map[string]any{"name": ReportsMetric, "value": strconv.Itoa(n)})
	return out
}

// numbered is the metrics m0=0 … m<n-1>=n-1.
func numbered(n int) []any {
	ms := make([]any, n)
	for i := range ms {
		ms[i] = map[string]any{"name": "m" + strconv.Itoa(i), "value": strconv.Itoa(i)}
	}
	return ms
}

// Every report() is one, whatever it says: a bare report() (a heartbeat), and one whose values
// were all left out, post the last values reported again (the server replaces the whole
// trainerStatus: posting nothing would wipe the loss the status shows) with report()'s count,
// which tells them from the command script's own post. The 5 s throttle still holds.
func TestEveryReportPosts(t *testing.T) {
	loss := map[string]any{"name": "loss", "value": "0.5"}
	for _, tc := range []struct {
		name  string
		calls string
		want  []map[string]any
	}{
		{
			name:  "a heartbeat keeps what was reported",
			calls: "report(progress=10, loss=0.5)\n    tick()\n    report()\n    tick()\n    report(progress='half')\n",
			want: []map[string]any{
				counted(1, map[string]any{"progressPercentage": 10.0, "metrics": []any{loss}}),
				counted(2, map[string]any{"progressPercentage": 10.0, "metrics": []any{loss}}),
				counted(3, map[string]any{"progressPercentage": 10.0, "metrics": []any{loss}}),
			},
		},
		{
			name:  "a heartbeat before anything was reported",
			calls: "report()\n",
			want:  []map[string]any{counted(1, map[string]any{})},
		},
		{
			name:  "heartbeats within 5 s are held, the latest posted at exit",
			calls: "report(progress=10)\n    report()\n    report()\n",
			want: []map[string]any{
				counted(1, map[string]any{"progressPercentage": 10.0}),
				counted(3, map[string]any{"progressPercentage": 10.0}),
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "def train():\n    import time\n    clock = [0.0]\n    time.monotonic = lambda: clock[0]\n\n" +
				"    def tick():\n        clock[0] += 6\n\n    " + tc.calls
			rec, env := reportEnv(t, http.StatusOK)
			out, _, err := runResult(t, src, env...)
			require.NoError(t, err, out)
			_, got := rec.requests()
			assert.Equal(t, tc.want, got, out)
		})
	}
}

// Where the Trainer injected no server (its TrainJobStatus gate is off), report() does nothing
// and says so once.
func TestReportWithoutAServerSaysSoOnce(t *testing.T) {
	out, _, err := runResult(t, "def train():\n    report(progress=10)\n    report(progress=20)\n    return 1\n", "KUBEFLOW_TRAINER_SERVER_URL=")
	require.NoError(t, err, out)
	assert.Equal(t, 1, strings.Count(out, "trainstep: report(): progress reporting is off"), out)
	assert.Contains(t, out, "TrainJobStatus feature gate is off on this cluster")
}

// A function that reports every half second for 25 s is throttled in five 5-second windows;
// what is held back is posted once at exit, the latest of it, however many windows held some.
// The script's clock is the driver's: time.monotonic is replaced, so nothing sleeps.
func TestReportPostsTheHeldStatusOnceAtExit(t *testing.T) {
	src := `def train():
    import time
    clock = [0.0]
    time.monotonic = lambda: clock[0]
    for i in range(50):
        clock[0] = i * 0.5
        report(progress=i, step=i)
`
	rec, env := reportEnv(t, http.StatusOK)
	out, _, err := runResult(t, src, env...)
	require.NoError(t, err, out)
	_, got := rec.requests()
	posted := func(i int) map[string]any {
		return counted(i+1, map[string]any{"progressPercentage": float64(i), "metrics": []any{map[string]any{"name": "step", "value": strconv.Itoa(i)}}})
	}
	// One at the start of each window (t = 0, 5, 10, 15, 20 s), then the last call, at exit.
	want := []map[string]any{posted(0), posted(10), posted(20), posted(30), posted(40), posted(49)}
	assert.Equal(t, want, got, out)
}

// reportFakes mimic what training code passes report() without torch or numpy on the test
// machine: a tensor (item() gives the number, str() is long), numpy-like scalars (a float32 has
// item(); numpy 2 writes a float64, a float, as np.float64(0.5)), a multi-element tensor (item()
// raises), and an object whose str() raises.
const reportFakes = `
class Tensor:
    def __init__(self, v):
        self.v = v
    def item(self):
        return self.v
    def __str__(self):
        return "tensor(%r, device='cuda:0', grad_fn=<NllLossBackward0>, requires_grad=True)" % self.v
    __repr__ = __str__

class Float32:
    def __init__(self, v):
        self.v = v
    def item(self):
        return self.v
    def __str__(self):
        return "array(%r, dtype=float32)" % self.v

class float64(float):
    def __repr__(self):
        return "np.float64(%s)" % float.__repr__(self)
    __str__ = __repr__

class Batch(Tensor):
    def item(self):
        raise ValueError("only one element tensors can be converted to Python scalars")
    def __str__(self):
        return "tensor([" + ", ".join(["0.1000"] * 40) + "])"

class Rogue:
    def __str__(self):
        raise RuntimeError("no str for you")
    __repr__ = __str__
`

// report() never raises, whatever the training function hands it, and what it posts is what
// the Trainer accepts: whole-number progress and time left, metric values that are numbers
// written as numbers and at most 64 characters. A value it cannot use is left out, said once.
func TestReportTakesWhatTrainingCodeHasAtHand(t *testing.T) {
	metric := func(name, value string) map[string]any { return map[string]any{"name": name, "value": value} }
	for _, tc := range []struct {
		name    string
		call    string
		want    map[string]any // what is posted beside report()'s count
		wantLog string
	}{
		{
			name: "a tensor is its item()",
			call: "progress=Tensor(10), loss=Tensor(0.31)",
			want: map[string]any{"progressPercentage": 10.0, "metrics": []any{metric("loss", "0.31")}},
		},
		{
			name: "a numpy-like scalar is its item()",
			call: "acc=Float32(0.88), step=Float32(7), done=Float32(True), ok=False, f1=float64(0.5)",
			want: map[string]any{"metrics": []any{metric("acc", "0.88"), metric("step", "7"), metric("done", "True"), metric("ok", "False"), metric("f1", "0.5")}},
		},
		{
			name:    "nan progress is left out, the metrics still go",
			call:    "progress=float('nan'), loss=0.5",
			want:    map[string]any{"metrics": []any{metric("loss", "0.5")}},
			wantLog: "trainstep: report(): progress=nan left out",
		},
		{
			name:    "inf time left is left out",
			call:    "progress=5, eta=float('inf')",
			want:    map[string]any{"progressPercentage": 5.0},
			wantLog: "trainstep: report(): eta=inf left out",
		},
		{
			name: "a percentage string",
			call: "progress='42%', eta='600'",
			want: map[string]any{"progressPercentage": 42.0, "estimatedRemainingSeconds": 600.0},
		},
		{
			name: "fractions: progress never rounds up to done, time left rounds",
			call: "progress=99.7, eta=12.6",
			want: map[string]any{"progressPercentage": 99.0, "estimatedRemainingSeconds": 13.0},
		},
		{
			name: "out of range is clamped",
			call: "progress=250, eta=-3, big=10**80",
			want: map[string]any{"progressPercentage": 100.0, "estimatedRemainingSeconds": 0.0, "metrics": []any{metric("big", "1e+80")}},
		},
		{
			name: "None is nothing to report",
			call: "progress=None, eta=None, loss=None, acc=0.9",
			want: map[string]any{"metrics": []any{metric("acc", "0.9")}},
		},
		{
			name: "a nan metric is a number the Trainer takes",
			call: "loss=float('nan'), acc=float('inf')",
			want: map[string]any{"metrics": []any{metric("loss", "nan"), metric("acc", "inf")}},
		},
		{
			name: "a long text is cut to 64 characters",
			call: "note='é' * 100",
			want: map[string]any{"metrics": []any{metric("note", strings.Repeat("é", 61)+"...")}},
		},
		{
			name:    "a value with no number and no usable text is left out",
			call:    "progress='half', eta=object(), batch=Batch(0), rogue=Rogue(), empty='', loss=0.25",
			want:    map[string]any{"metrics": []any{metric("loss", "0.25")}},
			wantLog: "trainstep: report(): batch left out",
		},
		{
			name:    "a metric name over 64 characters is left out",
			call:    "**{'x' * 65: 1, '': 3, 'ok': 2}",
			want:    map[string]any{"metrics": []any{metric("ok", "2")}},
			wantLog: "trainstep: report(): metric " + strings.Repeat("x", 65) + " left out",
		},
		{
			name:    "nothing left to post: a heartbeat all the same",
			call:    "progress='half'",
			want:    map[string]any{},
			wantLog: "trainstep: report(): progress='half' left out",
		},
		{
			name:    "a metric named as trainstep's own is left out",
			call:    "**{'trainstep.reports': 99, 'loss': 1}",
			want:    map[string]any{"metrics": []any{metric("loss", "1")}},
			wantLog: "trainstep: report(): metric trainstep.reports left out: names starting trainstep. are trainstep's own",
		},
		{
			name:    "more metrics than the Trainer takes: trainstep's own count among its 256",
			call:    "**{'m%d' % i: i for i in range(300)}",
			want:    map[string]any{"metrics": numbered(255)},
			wantLog: "trainstep: report(): 300 metrics: the Trainer takes 256, 1 of them trainstep's own, so the rest are left out",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := reportFakes + "\ndef train():\n    r = report(" + tc.call + ")\n    print('report returned', r)\n"
			rec, env := reportEnv(t, http.StatusOK)
			out, _, err := runResult(t, src, env...)
			require.NoError(t, err, out)
			assert.Contains(t, out, "report returned", "report() returned instead of raising")
			assert.Contains(t, out, tc.wantLog)
			_, got := rec.requests()
			require.Len(t, got, 1, out)
			assert.Equal(t, counted(1, tc.want), got[0], out)
			ms, _ := got[0]["metrics"].([]any)
			for _, m := range ms {
				v := m.(map[string]any)["value"].(string)
				assert.LessOrEqual(t, utf8.RuneCountInString(v), 64, "the Trainer refuses a metric value over 64 characters: %q", v)
			}
		})
	}
}
