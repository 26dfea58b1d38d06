package argo_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/trainstep/trainstep/plugin/argo"
	"github.com/trainstep/trainstep/test/internal/argoharness"
	"github.com/trainstep/trainstep/test/internal/harnessutil"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// BenchmarkJanitorRSS runs the real `executor argo-janitor` binary, built as the image ships it
// and with the GOMEMLIMIT of manifests/argo/janitor.yaml, over N finished Workflows (each a DAG
// of ten trainstep steps with their templates, inputs, outputs and messages, as Argo's
// controller leaves them) and reports its RSS, private memory and Go heap once its cache has
// synced and it has reconciled every Workflow.
func BenchmarkJanitorRSS(b *testing.B) {
	bin := shippedBinary(b)
	limit := janitorMemLimit(b)
	n := benchCount("TRAINSTEP_BENCH_WORKFLOWS", 5000) // finished Workflows
	ns := env.Namespace(b)
	t0 := time.Now()
	size := fillWorkflows(b, ns, n)
	b.Logf("%d finished Workflows of %.1f KB each created in %s", n, size, time.Since(t0).Round(time.Millisecond))
	b.Run(fmt.Sprintf("workflows=%d", n), func(b *testing.B) {
		var rss, anon, heap float64
		for range b.N {
			f := janitorFootprint(b, bin, ns, limit, n)
			rss, anon, heap = rss+f.rss, anon+f.anon, heap+f.heap
		}
		b.ReportMetric(rss/float64(b.N), "rss-MB")
		b.ReportMetric(anon/float64(b.N), "anon-MB")
		b.ReportMetric(heap/float64(b.N), "heap-MB")
		b.ReportMetric(size, "workflow-KB")
		b.ReportMetric(0, "ns/op")
	})
}

// janitorMemLimit is the GOMEMLIMIT the janitor's Deployment sets.
func janitorMemLimit(b *testing.B) string {
	raw, err := os.ReadFile("../../../manifests/argo/janitor.yaml")
	require.NoError(b, err)
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		d := &appsv1.Deployment{}
		if err := utilyaml.Unmarshal([]byte(doc), d); err != nil || d.Kind != "Deployment" {
			continue
		}
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "GOMEMLIMIT" {
				return e.Value
			}
		}
	}
	b.Fatal("manifests/argo/janitor.yaml sets no GOMEMLIMIT on the janitor")
	return ""
}

// janitorFootprint starts the janitor over ns, waits until it has reconciled n Workflows and
// settled, and reads its memory.
func janitorFootprint(b *testing.B, bin, ns, limit string, n int) footprint {
	metricsAddr, probeAddr := harnessutil.FreeAddr(b), harnessutil.FreeAddr(b)
	cmd := exec.CommandContext(b.Context(), bin, "argo-janitor", "--kubeconfig", env.Kubeconfig, "--namespaces", ns,
		"--metrics-bind-address", metricsAddr, "--health-probe-bind-address", probeAddr, "--log-format", "text")
	cmd.Env = append(os.Environ(), "GOMEMLIMIT="+limit)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr harnessutil.SyncBuffer
	cmd.Stderr = &stderr
	require.NoError(b, cmd.Start())
	defer func() { _ = cmd.Process.Signal(syscall.SIGKILL); _ = cmd.Wait() }()
	h := &harness{Metrics: "http://" + metricsAddr}
	reconciled := func() float64 {
		var sum float64
		for _, line := range strings.Split(must(httpGet(h.Metrics+"/metrics")), "\n") {
			if !strings.HasPrefix(line, `controller_runtime_reconcile_total{controller="`+argo.JanitorName+`"`) {
				continue
			}
			if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
				sum += v
			}
		}
		return sum
	}
	require.Eventually(b, func() bool {
		res, err := httpGet("http://" + probeAddr + "/readyz")
		return err == nil && res == "ok" && reconciled() >= float64(n)
	}, 3*testenv.Timeout, testenv.Interval, "the janitor must sync and reconcile %d Workflows: %s", n, &stderr)
	// Let the first list's garbage go: the janitor runs for months.
	time.Sleep(3 * time.Second) //nolint:forbidigo // a settling time before a reading, not a synchronisation
	var f footprint
	var err error
	f.rss, _, err = argoharness.RSSMB(cmd.Process.Pid)
	require.NoError(b, err)
	f.anon, err = anonMB(cmd.Process.Pid)
	require.NoError(b, err)
	heapBytes, err := strconv.ParseFloat(metric(b, h, "go_memstats_heap_inuse_bytes"), 64)
	require.NoError(b, err)
	f.heap = heapBytes / (1 << 20)
	return f
}

func must(s string, err error) string {
	if err != nil {
		return ""
	}
	return s
}

// fillWorkflows creates n finished Workflows, 16 at a time, and returns the size of one in KB.
func fillWorkflows(b *testing.B, ns string, n int) float64 {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := c.Create(b.Context(), finishedWorkflow(ns, i)); err != nil {
				b.Errorf("creating Workflow %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	require.False(b, b.Failed())
	raw, err := json.Marshal(finishedWorkflow(ns, 0))
	require.NoError(b, err)
	return float64(len(raw)) / 1024
}

// finishedWorkflow is a Succeeded DAG of ten trainstep steps as Argo's controller leaves it:
// its spec, and per node the inputs, the plugin's outputs and a message.
func finishedWorkflow(ns string, i int) *wfv1.Workflow {
	name := fmt.Sprintf("done-%05d", i)
	start := metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute))
	end := metav1.NewTime(start.Add(42 * time.Minute))
	wf := &wfv1.Workflow{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
		argo.LabelCompleted: "true", "workflows.argoproj.io/phase": "Succeeded", "workflows.argoproj.io/creator": "system-serviceaccount-argo-ci",
	}}}
	body := `{"trainstep":{"key":"{{node.name}}","framework":"torch","trainer":{"numNodes":2,"func":"def train(lr):\n    import torch\n    print(lr)\n","funcArgs":{"lr":"{{inputs.parameters.lr}}"}},"timeout":"2h"}}`
	var tasks []wfv1.DAGTask
	for s := range 10 {
		tasks = append(tasks, wfv1.DAGTask{Name: fmt.Sprintf("train-%d", s), Template: "train",
			Arguments: wfv1.Arguments{Parameters: []wfv1.Parameter{{Name: "lr", Value: wfv1.AnyStringPtr(fmt.Sprintf("0.%03d", s+1))}}}})
	}
	wf.Spec = wfv1.WorkflowSpec{Entrypoint: "main", ServiceAccountName: "trainstep-workflow", Templates: []wfv1.Template{
		{Name: "main", DAG: &wfv1.DAGTemplate{Tasks: tasks}},
		{Name: "train", Inputs: wfv1.Inputs{Parameters: []wfv1.Parameter{{Name: "lr"}}},
			Outputs: wfv1.Outputs{Parameters: []wfv1.Parameter{{Name: "trainjob-name", ValueFrom: &wfv1.ValueFrom{Supplied: &wfv1.SuppliedValueFrom{}}},
				{Name: "phase", ValueFrom: &wfv1.ValueFrom{Supplied: &wfv1.SuppliedValueFrom{}}}}},
			Plugin: &wfv1.Plugin{Object: wfv1.Object{Value: json.RawMessage(body)}}},
	}}
	root := wfv1.NodeStatus{ID: name, Name: name, DisplayName: name, Type: wfv1.NodeTypeDAG, TemplateName: "main", Phase: wfv1.NodeSucceeded,
		StartedAt: start, FinishedAt: end}
	nodes := wfv1.Nodes{}
	for s := range 10 {
		id := fmt.Sprintf("%s-%010d", name, s)
		root.Children = append(root.Children, id)
		nodes[id] = wfv1.NodeStatus{ID: id, Name: fmt.Sprintf("%s.train-%d", name, s), DisplayName: fmt.Sprintf("train-%d", s),
			Type: wfv1.NodeTypePlugin, TemplateName: "train", Phase: wfv1.NodeSucceeded, BoundaryID: name, StartedAt: start, FinishedAt: end,
			Message: "TrainJob train-0-3f9a2c41d7e8 succeeded: 2/2 nodes completed (AllJobsCompleted)",
			Inputs:  &wfv1.Inputs{Parameters: []wfv1.Parameter{{Name: "lr", Value: wfv1.AnyStringPtr(fmt.Sprintf("0.%03d", s+1))}}},
			Outputs: &wfv1.Outputs{Parameters: []wfv1.Parameter{
				{Name: "trainjob-name", Value: wfv1.AnyStringPtr(fmt.Sprintf("train-%d-3f9a2c41d7e8", s))},
				{Name: "phase", Value: wfv1.AnyStringPtr("Succeeded")},
				{Name: "num-nodes", Value: wfv1.AnyStringPtr("2")},
				{Name: "result", Value: wfv1.AnyStringPtr(`{"model_uri": "s3://models/run-42/checkpoint-final", "loss": 0.0123, "accuracy": 0.987}`)},
			}},
			ResourcesDuration: wfv1.ResourcesDuration{"cpu": 2520, "memory": 2520},
		}
	}
	nodes[name] = root
	wf.Status = wfv1.WorkflowStatus{Phase: wfv1.WorkflowSucceeded, StartedAt: start, FinishedAt: end, Progress: "10/10", Nodes: nodes,
		Conditions: wfv1.Conditions{{Type: wfv1.ConditionTypePodRunning, Status: metav1.ConditionFalse}, {Type: wfv1.ConditionTypeCompleted, Status: metav1.ConditionTrue}}}
	return wf
}
