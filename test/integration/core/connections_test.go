package core_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// wire counts what a step sends to the apiserver: TCP connections where they are dialed, and
// requests (watches, the log stream) where they enter the HTTP client.
type wire struct {
	mu       sync.Mutex
	dialed   int
	requests []string
}

func (w *wire) config(cfg *rest.Config) {
	var d net.Dialer
	cfg.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		w.mu.Lock()
		w.dialed++
		w.mu.Unlock()
		return d.DialContext(ctx, network, address)
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			w.mu.Lock()
			w.requests = append(w.requests, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
			w.mu.Unlock()
			return rt.RoundTrip(r)
		})
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// count returns the connections dialed and the requests whose text contains each of parts.
func (w *wire) count(parts ...string) (dialed, matching int) {
	w.mu.Lock()
	defer w.mu.Unlock()
next:
	for _, r := range w.requests {
		for _, p := range parts {
			if !strings.Contains(r, p) {
				continue next
			}
		}
		matching++
	}
	return w.dialed, matching
}

// TestRunStepHoldsAtMostTwoConnections: `executor run` follows its TrainJob with three watches
// (the TrainJob, its pods, the Events about it) and streams node-0's log, all at once, over at
// most 2 TCP connections to the apiserver: one HTTP/2 connection carries every request as a
// stream (with DISABLE_HTTP2=1 each watch dials its own, and this test fails).
func TestRunStepHoldsAtMostTwoConnections(t *testing.T) {
	ns := env.Namespace(t)
	w := &wire{}
	f := filepath.Join(t.TempDir(), "step.yaml")
	require.NoError(t, os.WriteFile(f, []byte("framework: xgboost\nlabels: {sim-mode: hold}\ntrainer:\n  numNodes: 2\n  func: \"def train(): pass\"\n"), 0o644))
	var stdout, stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- cli.MainWith(t.Context(), []string{"run", "-f", f, "--kubeconfig", env.Kubeconfig, "-n", ns, "--output-dir", t.TempDir()},
			strings.NewReader(""), &stdout, &stderr, cli.Overrides{Config: w.config})
	}()
	// Everything at once: three watches and the node-0 log stream (through pods/log, which the
	// test bed's apiserver refuses for a pod on no node, after the request is made).
	require.Eventually(t, func() bool {
		_, watches := w.count("watch=true")
		_, logs := w.count("/log", "follow=true")
		return watches >= 3 && logs >= 1
	}, testenv.Timeout, testenv.Interval, "three watches and the log stream")
	tjs := testenv.TrainJobs(t.Context(), t, env.Client, ns)
	require.Len(t, tjs, 1)
	// The simulator and the step's started-at patch write the TrainJob too: read it again on a
	// conflict, as any controller would.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		tj := &trainer.TrainJob{}
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(&tjs[0]), tj); err != nil {
			return err
		}
		apimeta.SetStatusCondition(&tj.Status.Conditions, metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "AllJobsCompleted", Message: "done"})
		return env.Client.Status().Update(t.Context(), tj)
	}))
	require.Equal(t, cli.ExitSucceeded, <-done, "stderr: %s", stderr.String())

	dialed, requests := w.count("")
	t.Logf("one step: %d TCP connection(s) dialed, %d requests over them", dialed, requests)
	assert.GreaterOrEqual(t, dialed, 1, "the Dial override is used")
	assert.LessOrEqual(t, dialed, 2, "a step holds at most 2 connections")
}
