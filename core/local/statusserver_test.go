package local

import (
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
