package argo_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/google/uuid"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/argo"
	"github.com/trainstep/trainstep/test/internal/argotest"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// step is a trainstep plugin body whose TrainJob does what mode says in the simulator.
func step(key, mode string, extra ...string) string {
	return fmt.Sprintf(`key: %q
framework: xgboost
labels: {%s: %s}
trainer:
  numNodes: 1
  func: |
    def train():
        print("training")
%s`, key, SimMode, mode, strings.Join(extra, "\n"))
}

// TestReplies covers every reply of the contract that needs no running TrainJob.
func TestReplies(t *testing.T) {
	ns := env.Namespace(t)
	h := startPlugin(t, ns, nil)
	uid := uuid.NewString()
	mustArgs := func(body string, opts ...func(*wfv1.Template)) []byte {
		a, err := argotest.Args("wf", ns, uid, body, opts...)
		require.NoError(t, err)
		b, err := json.Marshal(a)
		require.NoError(t, err)
		return b
	}
	foreign, err := json.Marshal(map[string]any{
		"workflow": map[string]any{"metadata": map[string]any{"name": "wf", "namespace": ns, "uid": uid}},
		"template": map[string]any{"name": "other", "plugin": map[string]any{"hello": map[string]any{"key": "x"}}},
	})
	require.NoError(t, err)
	httpTemplate, err := json.Marshal(map[string]any{
		"workflow": map[string]any{"metadata": map[string]any{"name": "wf", "namespace": ns, "uid": uid}},
		"template": map[string]any{"name": "fetch", "http": map[string]any{"url": "http://example.com"}},
	})
	require.NoError(t, err)

	cases := map[string]struct {
		token      string
		body       []byte
		wantStatus int
		wantBody   string // exact body, when set
		wantPhase  wfv1.NodePhase
		wantMsg    []string // substrings of node.message
	}{
		"foreign plugin key is not ours": {token: h.Token, body: foreign, wantStatus: 200, wantBody: "{}"},
		"an HTTP template is not ours":   {token: h.Token, body: httpTemplate, wantStatus: 200, wantBody: "{}"},
		"missing token":                  {token: "", body: mustArgs(step("train", "succeed")), wantStatus: 403},
		"wrong token":                    {token: "nope", body: mustArgs(step("train", "succeed")), wantStatus: 403},
		"token prefix only":              {token: h.Token[:8], body: mustArgs(step("train", "succeed")), wantStatus: 403},
		"malformed JSON":                 {token: h.Token, body: []byte(`{"workflow":`), wantStatus: 400},
		"two plugin keys":                {token: h.Token, body: []byte(`{"workflow":{"metadata":{"uid":"u"}},"template":{"plugin":{"a":{},"b":{}}}}`), wantStatus: 400},
		"oversized body":                 {token: h.Token, body: bytes.Repeat([]byte(" "), argo.DefaultMaxBody+1), wantStatus: 413},
		"unknown step field": {token: h.Token, body: mustArgs(step("train", "succeed", "epochz: 3")), wantStatus: 200,
			wantPhase: wfv1.NodeFailed, wantMsg: []string{"plugin.trainstep", "epochz"}},
		"no step key": {token: h.Token, body: mustArgs(strings.Replace(step("train", "succeed"), `key: "train"`, "", 1)), wantStatus: 200,
			wantPhase: wfv1.NodeFailed, wantMsg: []string{"plugin.trainstep.key", "{{node.name}}"}},
		"unsubstituted step key": {token: h.Token, body: mustArgs(step("{{node.name}}", "succeed")), wantStatus: 200,
			wantPhase: wfv1.NodeFailed, wantMsg: []string{"plugin.trainstep.key"}},
		"retry strategy without attempt": {token: h.Token, body: mustArgs(step("train", "succeed"), argotest.WithRetry(2)), wantStatus: 200,
			wantPhase: wfv1.NodeFailed, wantMsg: []string{"plugin.trainstep.attempt", "{{retries}}"}},
		"attempt not a number": {token: h.Token, body: mustArgs(step("train", "succeed", `attempt: "{{retries}}"`)), wantStatus: 200,
			wantPhase: wfv1.NodeFailed, wantMsg: []string{"plugin.trainstep.attempt"}},
		"unknown declared output": {token: h.Token, body: mustArgs(step("train", "succeed"), argotest.WithOutputs("trainjob-name", "model-uri")), wantStatus: 200,
			wantPhase: wfv1.NodeFailed, wantMsg: []string{"outputs.parameters[1].name", "model-uri"}},
		"bad template timeout": {token: h.Token, body: mustArgs(step("train", "succeed"), argotest.WithTimeout("soon")), wantStatus: 200,
			wantPhase: wfv1.NodeFailed, wantMsg: []string{"timeout"}},
		"unknown runtime": {token: h.Token, body: mustArgs(step("train", "succeed", "runtime: {name: nope}")), wantStatus: 200,
			wantPhase: wfv1.NodeFailed, wantMsg: []string{"runtime"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r, err := argotest.Call(t.Context(), h.URL, tc.token, tc.body)
			require.NoError(t, err)
			require.Equal(t, tc.wantStatus, r.Status, "body: %s", r.Body)
			if tc.wantBody != "" {
				assert.JSONEq(t, tc.wantBody, string(r.Body))
			}
			if tc.wantPhase != "" {
				require.NotNil(t, r.Node, "body: %s", r.Body)
				assert.Equal(t, tc.wantPhase, r.Node.Phase)
				assert.Nil(t, r.Requeue, "a terminal reply must carry no requeue")
				for _, m := range tc.wantMsg {
					assert.Contains(t, r.Node.Message, m)
				}
				// A step refused before any TrainJob is invalid, first in the message for
				// a retryStrategy.expression and in the outputs for the next step.
				assert.True(t, strings.HasPrefix(r.Node.Message, "failure-class=invalid retryable=false: "), r.Node.Message)
			}
		})
	}
	assert.Empty(t, testenv.TrainJobs(t.Context(), t, c, ns), "no reply above may create a TrainJob")
}

// TestRoutes: the execute path is never 404, unknown paths are, health and metrics answer.
func TestRoutes(t *testing.T) {
	h := startPlugin(t, env.Namespace(t), nil)
	cases := map[string]struct {
		method, path string
		want         int
		contains     string
	}{
		"GET on the execute path":           {http.MethodGet, argo.ExecutePath, http.StatusMethodNotAllowed, ""},
		"unknown path":                      {http.MethodPost, "/api/v1/template.nope", http.StatusNotFound, ""},
		"healthz":                           {http.MethodGet, "/healthz", http.StatusOK, "ok"},
		"readyz":                            {http.MethodGet, "/readyz", http.StatusOK, "ok"},
		"no metrics beside the execute API": {http.MethodGet, "/metrics", http.StatusNotFound, ""},
		"metrics on the metrics address":    {http.MethodGet, "metrics:/metrics", http.StatusOK, "trainstep_argo_held_calls"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			url := h.URL + tc.path
			if p, ok := strings.CutPrefix(tc.path, "metrics:"); ok {
				url = h.Metrics + p
			}
			req, err := http.NewRequestWithContext(t.Context(), tc.method, url, http.NoBody)
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, tc.want, resp.StatusCode)
			assert.Contains(t, string(b), tc.contains)
		})
	}
}

// TestTokenRotation: the token file is re-read when it changes.
func TestTokenRotation(t *testing.T) {
	ns := env.Namespace(t)
	h := startPlugin(t, ns, nil)
	args, err := argotest.Args("wf", ns, uuid.NewString(), step("train", "succeed"), func(t *wfv1.Template) { t.Plugin = nil })
	require.NoError(t, err)
	r, err := argotest.Execute(t.Context(), h.URL, h.Token, args)
	require.NoError(t, err)
	require.Equal(t, 200, r.Status)

	next := uuid.NewString()
	tmp := h.TokenFile + ".new"
	require.NoError(t, os.WriteFile(tmp, []byte(next+"\n"), 0o440))
	require.NoError(t, os.Rename(tmp, h.TokenFile))
	r, err = argotest.Execute(t.Context(), h.URL, h.Token, args)
	require.NoError(t, err)
	assert.Equal(t, 403, r.Status, "the old token must stop working")
	r, err = argotest.Execute(t.Context(), h.URL, next, args)
	require.NoError(t, err)
	assert.Equal(t, 200, r.Status, "the new token must work")
}

// TestReplayFindsTheSameTrainJob: the same call 100 times (20 at once) lands on one TrainJob.
func TestReplayFindsTheSameTrainJob(t *testing.T) {
	ns := env.Namespace(t)
	h := startPlugin(t, ns, func(o *argo.Options) { o.HoldMax = 0 })
	args, err := wfArgs(t, ns, step("train", "hold"))
	require.NoError(t, err)
	names := make(chan string, 100)
	sem := make(chan struct{}, 20)
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			r, err := argotest.Execute(t.Context(), h.URL, h.Token, args)
			if !assert.NoError(t, err) || !assert.Equal(t, 200, r.Status) || !assert.NotNil(t, r.Node) {
				return
			}
			assert.Contains(t, []wfv1.NodePhase{wfv1.NodePending, wfv1.NodeRunning}, r.Node.Phase, r.Node.Message)
			require.NotNil(t, r.Requeue, "an unfinished step must be requeued")
			assert.Equal(t, time.Second, r.Requeue.Duration)
			name, _ := r.Output(trainjob.OutName)
			names <- name
		})
	}
	wg.Wait()
	close(names)
	seen := map[string]bool{}
	for n := range names {
		seen[n] = true
	}
	assert.Len(t, seen, 1, "every reply must name the same TrainJob: %v", seen)
	assert.Len(t, testenv.TrainJobs(t.Context(), t, c, ns), 1)
}

// setTrainerProgress writes status.trainerStatus as the Trainer v2.2+ does, again on a conflict
// (the plugin records the job's start beside its calls, so the job may change meanwhile).
func setTrainerProgress(t *testing.T, ns, name string, pct int32) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		tj := &trainer.TrainJob{}
		if err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, tj); err != nil {
			return err
		}
		tj.Status.TrainerStatus = &trainer.TrainerStatus{ProgressPercentage: &pct, LastUpdatedTime: metav1.Now()}
		return c.Status().Update(t.Context(), tj)
	}))
}

// TestNodeProgress: the reply's progress is running nodes / nodes, then the Trainer's
// progressPercentage as P/100 once it reports one.
func TestNodeProgress(t *testing.T) {
	ns := env.Namespace(t)
	h := startPlugin(t, ns, func(o *argo.Options) { o.HoldMax = 0 })
	args, err := wfArgs(t, ns, step("train", "hold"))
	require.NoError(t, err)
	var name string
	require.Eventually(t, func() bool {
		r, err := argotest.Execute(t.Context(), h.URL, h.Token, args)
		if err != nil || r.Node == nil {
			return false
		}
		name, _ = r.Output(trainjob.OutName)
		return r.Node.Phase == wfv1.NodeRunning && r.Node.Progress == "1/1"
	}, testenv.Timeout, 50*time.Millisecond, "a running 1-node step is 1/1")
	setTrainerProgress(t, ns, name, 40)
	require.Eventually(t, func() bool {
		r, err := argotest.Execute(t.Context(), h.URL, h.Token, args)
		return err == nil && r.Node != nil && r.Node.Progress == "40/100" && strings.Contains(r.Node.Message, "1/1 nodes · 40%")
	}, testenv.Timeout, 50*time.Millisecond, "the Trainer's percentage")
}
