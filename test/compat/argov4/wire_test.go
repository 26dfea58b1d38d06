// Package argov4 proves, against Argo v4's own Go types, that the executor-plugin wire contract
// trainstep speaks (built against github.com/argoproj/argo-workflows/v3 in the main module) is
// the one Argo v4 speaks: what a v4 agent sends decodes into the v3 types the plugin reads, what
// the plugin answers decodes into v4's reply with no field dropped or unknown, and a v4
// Workflow's status (read by the janitor and the reaper) decodes into v3's.
//
// It is its own module so that the main go.mod keeps one Argo major version: v3 and v4 are
// different module paths, and only this test needs both. `make test-compat` runs it in the
// argo@v4.0.7 row (hack/compat).
package argov4

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	v3 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	v3exec "github.com/argoproj/argo-workflows/v3/pkg/plugins/executor"
	v4 "github.com/argoproj/argo-workflows/v4/pkg/apis/workflow/v1alpha1"
	v4exec "github.com/argoproj/argo-workflows/v4/pkg/plugins/executor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// roundTrip marshals from, decodes it strictly into to (an unknown field fails), marshals to
// again, and checks both JSON documents say the same.
func roundTrip(t *testing.T, from, to any) {
	t.Helper()
	sent, err := json.Marshal(from)
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(sent))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(to), "decoding %s", sent)
	read, err := json.Marshal(to)
	require.NoError(t, err)
	assert.JSONEq(t, string(sent), string(read))
}

// The request a v4 agent POSTs to /api/v1/template.execute, with every field the plugin reads
// (request.go, execute.go): the workflow's identity, the template's name, plugin body,
// retryStrategy, declared outputs and timeout.
func TestV4RequestDecodesIntoTheV3TypesThePluginReads(t *testing.T) {
	limit := intstr.FromInt32(2)
	args := v4exec.ExecuteTemplateArgs{
		Workflow: &v4exec.Workflow{ObjectMeta: v4exec.ObjectMeta{Name: "train-x7k2p", Namespace: "ml", UID: "2d7c1f4e-0000-4000-8000-000000000001"}},
		Template: &v4.Template{
			Name:          "train",
			Plugin:        &v4.Plugin{Object: v4.Object{Value: json.RawMessage(`{"trainstep":{"key":"train-x7k2p-1","attempt":"0","trainer":"torch","command":["python","-c","print(1)"]}}`)}},
			RetryStrategy: &v4.RetryStrategy{Limit: &limit},
			Outputs:       v4.Outputs{Parameters: []v4.Parameter{{Name: "trainjob-name", ValueFrom: &v4.ValueFrom{Supplied: &v4.SuppliedValueFrom{}}}}},
			Timeout:       "1h",
		},
	}
	var got v3exec.ExecuteTemplateArgs
	roundTrip(t, args, &got)
	assert.Equal(t, "train-x7k2p", got.Workflow.ObjectMeta.Name)
	assert.Equal(t, "2d7c1f4e-0000-4000-8000-000000000001", got.Workflow.ObjectMeta.UID)
	assert.JSONEq(t, string(args.Template.Plugin.Value), string(got.Template.Plugin.Value))
	assert.Equal(t, "trainjob-name", got.Template.Outputs.Parameters[0].Name)
	assert.Equal(t, "1h", got.Template.Timeout)
}

// The replies the plugin sends (execute.go: inProgress, pending, failed), built with the v3
// types, as the v4 agent decodes them.
func TestPluginRepliesDecodeIntoV4(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply v3exec.ExecuteTemplateReply
	}{
		{name: "running with outputs and progress", reply: v3exec.ExecuteTemplateReply{
			Node: &v3.NodeResult{Phase: v3.NodeRunning, Message: "2/2 nodes running", Progress: v3.Progress("1/2"),
				Outputs: &v3.Outputs{Parameters: []v3.Parameter{{Name: "trainjob-name", Value: v3.AnyStringPtr("train-x7k2p-1")}}}},
			Requeue: &metav1.Duration{Duration: 10 * time.Second}}},
		{name: "succeeded", reply: v3exec.ExecuteTemplateReply{
			Node: &v3.NodeResult{Phase: v3.NodeSucceeded, Message: "TrainJob ml/train-x7k2p-1 completed",
				Outputs: &v3.Outputs{Parameters: []v3.Parameter{{Name: "result.loss", Value: v3.AnyStringPtr("0.12")}}}}}},
		{name: "failed", reply: v3exec.ExecuteTemplateReply{Node: &v3.NodeResult{Phase: v3.NodeFailed, Message: "node 0 failed: Traceback…"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got v4exec.ExecuteTemplateReply
			roundTrip(t, tc.reply, &got)
			assert.Equal(t, string(tc.reply.Node.Phase), string(got.Node.Phase))
			assert.Equal(t, tc.reply.GetRequeue(), got.GetRequeue())
		})
	}
}

// A v4 Workflow as the janitor and the reaper read it: labels, phase, and the nodes found by
// name (a plugin node and its retry child).
func TestV4WorkflowDecodesIntoV3(t *testing.T) {
	wf := v4.Workflow{
		TypeMeta:   metav1.TypeMeta{APIVersion: "argoproj.io/v1alpha1", Kind: "Workflow"},
		ObjectMeta: metav1.ObjectMeta{Name: "train-x7k2p", Namespace: "ml", UID: "u1", Labels: map[string]string{"workflows.argoproj.io/completed": "true"}},
		Status: v4.WorkflowStatus{Phase: v4.WorkflowFailed, Nodes: v4.Nodes{
			"train-x7k2p-1":  {ID: "train-x7k2p-1", Name: "train-x7k2p.train", Type: v4.NodeTypeRetry, Phase: v4.NodeFailed, Children: []string{"train-x7k2p-2"}},
			"train-x7k2p-2":  {ID: "train-x7k2p-2", Name: "train-x7k2p.train(0)", Type: v4.NodeTypePlugin, Phase: v4.NodeFailed, Message: "node 0 failed"},
			"train-x7k2p-ok": {ID: "train-x7k2p-ok", Name: "train-x7k2p.eval", Type: v4.NodeTypePlugin, Phase: v4.NodeSucceeded},
		}},
	}
	var got v3.Workflow
	roundTrip(t, wf, &got)
	assert.True(t, got.Status.Phase.Completed())
	require.NotNil(t, got.Status.Nodes.FindByName("train-x7k2p.train(0)"))
	assert.Equal(t, v3.NodeTypePlugin, got.Status.Nodes.FindByName("train-x7k2p.train(0)").Type)
}
