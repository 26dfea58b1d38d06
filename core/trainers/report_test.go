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
				{"progressPercentage": 10.0, "estimatedRemainingSeconds": 60.0, "metrics": []any{map[string]any{"name": "loss", "value": "0.5"}}},
				{"progressPercentage": 20.0, "metrics": []any{map[string]any{"name": "loss", "value": "0.4"}, map[string]any{"name": "acc", "value": "0.9"}}},
			},
		},
		{
			name: "100% always goes at once, and the held one is dropped for it",
			src:  "def train():\n    report(progress=50)\n    report(progress=60)\n    report(progress=100, loss=0.1)\n",
			code: http.StatusOK,
			want: []map[string]any{
				{"progressPercentage": 50.0},
				{"progressPercentage": 100.0, "metrics": []any{map[string]any{"name": "loss", "value": "0.1"}}},
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
			want:    []map[string]any{{"progressPercentage": 10.0}},
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
		return map[string]any{"progressPercentage": float64(i), "metrics": []any{map[string]any{"name": "step", "value": strconv.Itoa(i)}}}
	}
	// One at the start of each window (t = 0, 5, 10, 15, 20 s), then the last call, at exit.
	want := []map[string]any{posted(0), posted(10), posted(20), posted(30), posted(40), posted(49)}
	assert.Equal(t, want, got, out)
}
