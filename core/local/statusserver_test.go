package local

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/trainjob"
)

// Each node gets the Trainer's three env names; what a node posts over HTTPS with them (Python,
// verifying the CA) reaches OnProgress as a running observation and ends in the TrainJob's
// status.trainerStatus, replaced whole by each post as the Trainer's server-side apply does; a
// wrong token, a wrong path and a bad percentage are refused as the Trainer refuses them.
func TestNodesReportToTheLocalStatusServer(t *testing.T) {
	script := `
import json, os, ssl, urllib.error, urllib.request
if os.environ["JAX_PROCESS_ID"] != "0":
    raise SystemExit(0)
token = open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]).read()
ctx = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])
def post(status, tok=token, path=""):
    req = urllib.request.Request(os.environ["KUBEFLOW_TRAINER_SERVER_URL"] + path, method="POST",
        data=json.dumps({"trainerStatus": status}).encode(), headers={"Authorization": "Bearer " + tok})
    try:
        print(urllib.request.urlopen(req, context=ctx).status, flush=True)
    except urllib.error.HTTPError as e:
        print(e.code, flush=True)
post({"progressPercentage": 1}, tok="forged")
post({"progressPercentage": 1}, path="/more")
post({"progressPercentage": 101})
post({"progressPercentage": 42, "estimatedRemainingSeconds": 720, "metrics": [{"name": "loss", "value": "0.31"}]})
post({"progressPercentage": 100, "metrics": [{"name": "loss", "value": "0.12"}]})
`
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "local"}, Spec: trainer.TrainJobSpec{Trainer: &trainer.Trainer{
		NumNodes: ptr.To[int32](2), Command: []string{"python3", "-c", script},
	}}}
	var mu sync.Mutex
	var seen []string
	r := &Runner{OnProgress: func(o trainjob.Observation) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, o.Message)
	}}
	var lines []string
	r.OnLine = func(_ int, line string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, line)
	}
	res, err := r.Run(t.Context(), tj, &runtimes.Runtime{Name: "jax-distributed", Policy: runtimes.PolicyJAX, NumNodes: 1})
	require.NoError(t, err)
	require.Equal(t, 0, res.Nodes[0].ExitCode, res.Nodes[0].Log)
	assert.Equal(t, []string{"403", "404", "422", "200", "200"}, lines)
	assert.Equal(t, []string{
		"TrainJob job is running: 2/2 nodes · 42% · 12m left · loss=0.31",
		"TrainJob job is running: 2/2 nodes · 100% · loss=0.12",
	}, seen)
	obs := res.Observe()
	assert.Equal(t, "0.12", obs.Outputs()["metric-loss"])
	assert.Nil(t, res.TrainJob.Status.TrainerStatus.EstimatedRemainingSeconds, "a field the last post left out is gone")
}

// The local status server refuses what the Trainer's refuses, in the apiserver's words: its
// server-side apply is validated against the TrainJob CRD's trainerStatus schema (progress 0 to
// 100, time left ≥ 0, at most 256 metrics, names and values of 1 to 64 characters) and a body
// over 64 KiB, so a run that reports fine locally is not refused on a cluster, and one that is
// refused says why.
func TestStatusServerRefusesWhatTheTrainerRefuses(t *testing.T) {
	metrics := func(n int) []any {
		ms := make([]any, n)
		for i := range ms {
			ms[i] = map[string]any{"name": fmt.Sprintf("m%d", i), "value": "1"}
		}
		return ms
	}
	for _, tc := range []struct {
		name     string
		status   map[string]any
		wantCode int
		wantMsg  string
	}{
		{
			name:     "accepted at the limits",
			status:   map[string]any{"progressPercentage": 100, "estimatedRemainingSeconds": 0, "metrics": append(metrics(255), map[string]any{"name": strings.Repeat("n", 64), "value": strings.Repeat("é", 64)})},
			wantCode: http.StatusOK,
		},
		{
			name:     "a metric value over 64 characters",
			status:   map[string]any{"metrics": []any{map[string]any{"name": "loss", "value": "tensor(0.3100, device='cuda:0', grad_fn=<NllLossBackward0>, requires_grad=True)"}}},
			wantCode: http.StatusUnprocessableEntity,
			wantMsg:  `TrainJob.trainer.kubeflow.org "job" is invalid: status.trainerStatus.metrics[0].value: Too long: may not be more than 64 bytes`,
		},
		{
			name:     "a metric name over 64 characters",
			status:   map[string]any{"metrics": []any{map[string]any{"name": strings.Repeat("n", 65), "value": "1"}}},
			wantCode: http.StatusUnprocessableEntity,
			wantMsg:  "status.trainerStatus.metrics[0].name: Too long: may not be more than 64 bytes",
		},
		{
			name:     "an empty metric value",
			status:   map[string]any{"metrics": []any{map[string]any{"name": "loss", "value": ""}}},
			wantCode: http.StatusUnprocessableEntity,
			wantMsg:  "status.trainerStatus.metrics[0].value: Invalid value: \"\": must be 1 to 64 characters",
		},
		{
			name:     "more than 256 metrics",
			status:   map[string]any{"metrics": metrics(257)},
			wantCode: http.StatusUnprocessableEntity,
			wantMsg:  "status.trainerStatus.metrics: Too many: 257: must have at most 256 items",
		},
		{
			name:     "negative time left",
			status:   map[string]any{"estimatedRemainingSeconds": -1},
			wantCode: http.StatusUnprocessableEntity,
			wantMsg:  "status.trainerStatus.estimatedRemainingSeconds: Invalid value: -1: should be greater than or equal to 0",
		},
		{
			name:     "progress over 100",
			status:   map[string]any{"progressPercentage": 101},
			wantCode: http.StatusUnprocessableEntity,
			wantMsg:  "status.trainerStatus.progressPercentage: Invalid value: 101: should be less than or equal to 100",
		},
		{
			name:     "a body over 64 KiB",
			status:   map[string]any{"metrics": metrics(4000)},
			wantCode: http.StatusRequestEntityTooLarge,
			wantMsg:  "Payload too large",
		},
		{
			name:     "time left past int32 does not decode",
			status:   map[string]any{"estimatedRemainingSeconds": 1 << 31},
			wantCode: http.StatusUnprocessableEntity,
			wantMsg:  "Invalid payload",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var applied []trainer.TrainerStatus
			s, err := startStatusServer(t.TempDir(), "local", "job", func(ts trainer.TrainerStatus) { applied = append(applied, ts) })
			require.NoError(t, err)
			t.Cleanup(s.stop)
			code, status := postStatus(t, s, tc.status)
			assert.Equal(t, tc.wantCode, code, status.Message)
			if tc.wantCode == http.StatusOK {
				assert.Len(t, applied, 1)
				return
			}
			assert.Contains(t, status.Message, tc.wantMsg)
			assert.Equal(t, int32(tc.wantCode), status.Code)
			assert.Empty(t, applied, "a refused status is not applied")
			assert.Nil(t, s.last())
		})
	}
}

// postStatus posts trainerStatus to s as a node would and returns the answer's code and Status.
func postStatus(t *testing.T, s *statusServer, ts map[string]any) (int, metav1.Status) {
	t.Helper()
	ca, err := os.ReadFile(s.caFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(ca))
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	body, err := json.Marshal(map[string]any{"trainerStatus": ts})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var st metav1.Status
	if resp.StatusCode != http.StatusOK {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	}
	return resp.StatusCode, st
}
