package argo_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/pkg/plugins/executor"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/argo"
	"github.com/trainstep/trainstep/test/internal/argotest"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// countingConfig is env.Config with every request the client makes counted in n: the API
// requests of a plugin started on it (startPluginWith), watches and lists included.
func countingConfig(n *atomic.Int64) *rest.Config {
	return observedConfig(func(*http.Request) { n.Add(1) })
}

// observedConfig is env.Config with seen called on every request the client makes.
func observedConfig(seen func(*http.Request)) *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			seen(r)
			return rt.RoundTrip(r)
		})
	})
	return cfg
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// apiRequests counts a plugin's API requests: all of them, and apart those about Kueue's
// Workloads, watches (a GET with watch=true) and every other read (a LIST, a GET).
type apiRequests struct {
	all, workloadReads, workloadWatches atomic.Int64
}

// config is env.Config counting into a.
func (a *apiRequests) config() *rest.Config {
	return observedConfig(func(r *http.Request) {
		a.all.Add(1)
		if !strings.HasPrefix(r.URL.Path, "/apis/"+trainjob.WorkloadGVK.Group+"/") || !strings.Contains(r.URL.Path, "/workloads") {
			return
		}
		if r.URL.Query().Get("watch") == "true" {
			a.workloadWatches.Add(1)
			return
		}
		a.workloadReads.Add(1)
	})
}

// TestRunningKueueJobCostsNoRequests: a running 32-node job Kueue admitted is followed from the
// informer caches alone. Its calls make no API request, and over the job's whole life (queued,
// starting, running) Kueue's Workloads cost the one LIST and one WATCH of an informer at most,
// however many calls it gets: each Workload carries its job's pod templates, the training
// script among them.
func TestRunningKueueJobCostsNoRequests(t *testing.T) {
	const nodes = 32
	ns := env.Namespace(t)
	var n apiRequests
	h := startPluginWith(t, n.config(), ns, func(o *argo.Options) { o.HoldMax = 0 })
	wf := workflow(t, ns)
	args, err := argotest.Args(wf.Name, ns, string(wf.UID), kueueStep("train", "hold", nodes))
	require.NoError(t, err)
	name, _ := call(t, h, args).Output(trainjob.OutName)
	require.NotEmpty(t, name)
	createWorkload(t, trainJob(t, ns, name), nodes, admitted(nodes))

	// Running once its 32 pods run; that call records that it started.
	require.Eventually(t, func() bool {
		return call(t, h, args).Node.Phase == wfv1.NodeRunning && trainJob(t, ns, name).Annotations[trainjob.AnnotationStartedAt] != ""
	}, testenv.Timeout, testenv.Interval, "the 32-node job must run and be recorded started")
	// Until the cache shows the start, a call records it again.
	require.Eventually(t, func() bool {
		before := n.all.Load()
		call(t, h, args)
		return n.all.Load() == before
	}, testenv.Timeout, testenv.Interval, "a call on a running job must cost no API request")

	before := n.all.Load()
	for range 50 {
		r := call(t, h, args)
		require.Equal(t, wfv1.NodeRunning, r.Node.Phase, r.Node.Message)
	}
	assert.Zero(t, n.all.Load()-before, "50 calls on a running job must make no API request")
	t.Logf("Workload requests over the job's life: %d reads, %d watches", n.workloadReads.Load(), n.workloadWatches.Load())
	assert.LessOrEqual(t, n.workloadReads.Load(), int64(1), "Workloads are listed once, by an informer, not per call")
	assert.LessOrEqual(t, n.workloadWatches.Load(), int64(1), "Workloads are watched by one informer")
}

// TestQueuedKueueJobReadsItsWorkloadFromTheCache: while a job waits in Kueue's queue its
// Workload is read from an informer (one LIST and one WATCH, however many calls), and a change
// to it wakes a held call, which answers at once in Kueue's words.
func TestQueuedKueueJobReadsItsWorkloadFromTheCache(t *testing.T) {
	ns := env.Namespace(t)
	var n apiRequests
	// One call held at a time: the first call holds, every other is answered at once. The hold
	// is the longest allowed: a held call that no change wakes answers what it saw when held.
	h := startPluginWith(t, n.config(), ns, func(o *argo.Options) { o.HoldMax = 25 * time.Second; o.MaxHeld = 1 })
	wf := workflow(t, ns)
	args, err := argotest.Args(wf.Name, ns, string(wf.UID), kueueStep("train", "no-resources", 1))
	require.NoError(t, err)
	held := argotest.ExecuteAsync(t.Context(), h.URL, h.Token, args)
	var tj *trainer.TrainJob
	require.Eventually(t, func() bool {
		jobs := testenv.TrainJobs(t.Context(), t, c, ns)
		if len(jobs) != 1 {
			return false
		}
		tj = &jobs[0]
		return true
	}, testenv.Timeout, testenv.Interval, "the first call must create the TrainJob")
	require.Eventually(t, func() bool { return metric(t, h, "trainstep_argo_held_calls") == "1" }, testenv.Timeout, testenv.Interval)

	// What Kueue does to a job it queues: suspend it, and make its Workload, short of quota.
	suspend(t, tj)
	const short = "couldn't assign flavors to pod set node: insufficient quota for cpu in flavor default, request > maximum capacity (64 > 32)"
	wl := createWorkload(t, tj, 1, map[string]any{"conditions": []any{condition("QuotaReserved", "False", "Pending", short)}})
	require.Eventually(t, func() bool {
		return strings.Contains(call(t, h, args).Node.Message, short)
	}, testenv.Timeout, testenv.Interval, "a queued job's reply must say why it waits, in Kueue's words")
	reads, watches := n.workloadReads.Load(), n.workloadWatches.Load()
	for range 20 {
		assert.Contains(t, call(t, h, args).Node.Message, short)
	}
	t.Logf("Workload requests: %d reads and %d watches before 20 calls, %d and %d after", reads, watches, n.workloadReads.Load(), n.workloadWatches.Load())
	assert.Equal(t, reads, n.workloadReads.Load(), "20 calls on a queued job must make no Workload request")
	assert.Equal(t, watches, n.workloadWatches.Load(), "20 calls on a queued job must make no Workload request")
	assert.LessOrEqual(t, reads, int64(1), "Workloads are listed once, by an informer, not per call")
	assert.LessOrEqual(t, watches, int64(1), "Workloads are watched by one informer")

	const evicted = "Exceeded the PodsReady timeout for the workload"
	setWorkloadStatus(t, wl, map[string]any{"conditions": []any{
		condition("QuotaReserved", "False", "Pending", short),
		condition("Evicted", "True", "PodsReadyTimeout", evicted),
	}})
	select {
	case a := <-held:
		require.NoError(t, a.Err)
		require.NotNil(t, a.Reply.Node, "body: %s", a.Reply.Body)
		assert.Contains(t, a.Reply.Node.Message, evicted, "the held call must answer in Kueue's words")
		assert.Contains(t, a.Reply.Node.Message, "PodsReadyTimeout")
	case <-time.After(testenv.Timeout):
		t.Fatal("the held call did not answer")
	}
}

// kueueStep is a step body queued in LocalQueue team-a, with nodes nodes, whose TrainJob the
// simulator treats as mode.
func kueueStep(key, mode string, nodes int) string {
	return fmt.Sprintf(`key: %q
framework: xgboost
queueName: team-a
labels: {%s: %s}
trainer:
  numNodes: %d
  func: |
    def train():
        print("training")
`, key, SimMode, mode, nodes)
}

// call makes one execute call and requires a node in the reply.
func call(t *testing.T, h *harness, args executor.ExecuteTemplateArgs) argotest.Reply {
	t.Helper()
	r, err := argotest.Execute(t.Context(), h.URL, h.Token, args)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
	require.NotNil(t, r.Node, "body: %s", r.Body)
	return r
}

func trainJob(t *testing.T, ns, name string) *trainer.TrainJob {
	t.Helper()
	tj := &trainer.TrainJob{}
	require.NoError(t, c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, tj))
	return tj
}

// suspend sets spec.suspend, as Kueue's webhook does to a job it queues.
func suspend(t *testing.T, tj *trainer.TrainJob) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":true}}`))
	require.NoError(t, c.Patch(t.Context(), tj.DeepCopy(), patch))
}

// createWorkload writes the Workload Kueue makes for tj (its pod set of nodes pods, owned by tj,
// labelled with its UID) with status.
func createWorkload(t *testing.T, tj *trainer.TrainJob, nodes int, status map[string]any) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"queueName": tj.Labels[trainjob.LabelKueueQueue],
			"podSets": []any{map[string]any{"name": "node", "count": int64(nodes), "template": map[string]any{
				"spec": map[string]any{"containers": []any{map[string]any{"name": "node", "image": "python:3.12", "command": []any{"python", "-c", "print('training')"}}}},
			}}},
		},
	}}
	u.SetGroupVersionKind(trainjob.WorkloadGVK)
	u.SetNamespace(tj.Namespace)
	u.SetName("trainjob-" + tj.Name)
	u.SetLabels(map[string]string{trainjob.LabelKueueJobUID: string(tj.UID)})
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: trainer.GroupVersion.String(), Kind: "TrainJob", Name: tj.Name, UID: tj.UID, Controller: ptr.To(true)}})
	require.NoError(t, c.Create(t.Context(), u))
	setWorkloadStatus(t, u, status)
	return u
}

// setWorkloadStatus writes a Workload's status through its status subresource, as Kueue does.
func setWorkloadStatus(t *testing.T, w *unstructured.Unstructured, status map[string]any) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &unstructured.Unstructured{}
		cur.SetGroupVersionKind(trainjob.WorkloadGVK)
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(w), cur); err != nil {
			return err
		}
		cur.Object["status"] = status
		return c.Status().Update(t.Context(), cur)
	}))
}

// admitted is the status of a Workload of nodes pods Kueue admitted to ClusterQueue team-a.
func admitted(nodes int) map[string]any {
	return map[string]any{
		"conditions": []any{
			condition("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue team-a"),
			condition("Admitted", "True", "Admitted", "The workload is admitted"),
		},
		"admission": map[string]any{
			"clusterQueue":      "team-a",
			"podSetAssignments": []any{map[string]any{"name": "node", "count": int64(nodes)}},
		},
	}
}

func condition(typ, status, reason, message string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": message, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
}
