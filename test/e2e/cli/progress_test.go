package cli_test

import (
	"bytes"
	"errors"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/creack/pty"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/internal/cli"
)

// A function that posts to the status server with a plain HTTPS POST, as the Trainer's docs
// show (Option C): the env names are the Trainer's, the CA verifies the server, a wrong token is
// refused, and what it posts becomes the progress line and the metric outputs, as on a cluster.
const postingStep = `
framework: xgboost
trainer:
  func: |
    def train():
        import json, os, ssl, urllib.error, urllib.request
        url = os.environ["KUBEFLOW_TRAINER_SERVER_URL"]
        assert url.startswith("https://"), url
        token = open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]).read().strip()
        ctx = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])
        def post(status, tok=token):
            req = urllib.request.Request(url, method="POST", data=json.dumps({"trainerStatus": status}).encode(),
                                         headers={"Content-Type": "application/json", "Authorization": "Bearer " + tok})
            try:
                return urllib.request.urlopen(req, context=ctx, timeout=5).status
            except urllib.error.HTTPError as e:
                return e.code
        assert post({"progressPercentage": 1}, tok="forged") == 403
        assert post({"progressPercentage": 42, "estimatedRemainingSeconds": 720,
                     "metrics": [{"name": "loss", "value": "0.31"}, {"name": "acc", "value": "0.88"}]}) == 200
        assert post({"progressPercentage": 100,
                     "metrics": [{"name": "loss", "value": "0.12"}, {"name": "eval/f1", "value": "0.7"}]}) == 200
`

func TestLocalServesTheStatusEndpoint(t *testing.T) {
	r := local(t, postingStep)
	require.Equal(t, cli.ExitSucceeded, r.code, r.stderr)
	assert.Regexp(t, `trainstep: Running: TrainJob \S+ is running: 1/1 nodes · 42% · 12m left · loss=0.31 acc=0.88\n`, r.stderr)
	assert.Regexp(t, `trainstep: Running: TrainJob \S+ is running: 1/1 nodes · 100% · loss=0.12 eval/f1=0.7\n`, r.stderr)
	assert.Equal(t, "0.12", r.outputs["metric-loss"])
	assert.Equal(t, "0.7", r.outputs["metric-eval-f1"])
	assert.JSONEq(t, `{"loss":"0.12","eval/f1":"0.7"}`, r.outputs["metrics"])
	assert.Equal(t, "100", r.outputs["progress-percentage"])
}

// statusRedraw is one redraw of the status line: erase the line, then the bar and the rest.
var statusRedraw = regexp.MustCompile(`\r\x1b\[K(\[[█░]{20}\] [^\r\n]*)`)

// On a terminal, `executor run --local` of the hello example (whose function calls report())
// keeps one status line redrawn in place (bar, percent, time left, metrics, nodes running),
// with the streamed log above it: no log line shares a terminal line with the status line.
func TestLocalProgressBarOnATerminal(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), bin, "run", "--local", "--runtimes-from", "stock", "-f", "../../../examples/steps/hello-xgboost.yaml")
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 160})
	require.NoError(t, err)
	defer tty.Close()
	var screen bytes.Buffer
	_, err = io.Copy(&screen, tty) // until the process exits and the pty closes (EIO)
	var pathErr interface{ Timeout() bool }
	if err != nil && !errors.As(err, &pathErr) && !strings.Contains(err.Error(), "input/output error") {
		require.NoError(t, err)
	}
	werr := cmd.Wait()
	out := screen.String()
	require.NoError(t, werr, out)

	redraws := statusRedraw.FindAllStringSubmatch(out, -1)
	require.GreaterOrEqual(t, len(redraws), 2, "the status line is drawn, then redrawn:\n%q", out)
	first, last := redraws[0][1], redraws[len(redraws)-1][1]
	assert.Regexp(t, `^\[░{20}\] 0% · 3m1[49]s left · loss=[0-9.]+ · 2/2 nodes running$`, first)
	assert.Regexp(t, `^\[█{20}\] 100% · loss=[0-9.]+ · 2/2 nodes running$`, last)
	assert.Contains(t, out, "[node-0] worker 0 done")
	// Never interleaved: on every terminal line, what follows the last erase is either a log
	// line, a trainstep line or the status line, whole.
	for _, line := range strings.Split(out, "\n") {
		parts := strings.Split(line, "\r\x1b[K")
		for _, p := range parts {
			p = strings.TrimRight(p, "\r")
			if i := strings.Index(p, "[node-"); i > 0 {
				t.Errorf("a log line shares a terminal line with other output: %q", line)
			}
		}
	}
	assert.Contains(t, out, "metric-loss:", "the outputs name the metric")
}
