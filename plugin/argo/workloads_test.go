package argo

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/trainstep/trainstep/core/trainjob"
)

const testNS = "ns"

var workloadGVR = trainjob.WorkloadGVK.GroupVersion().WithResource("workloads")

func queuedJob(uid string, annotations map[string]string) *trainer.TrainJob {
	return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "job-" + uid, UID: types.UID(uid),
		Labels: map[string]string{trainjob.LabelKueueQueue: "team-a"}, Annotations: annotations}}
}

func workloadOf(tj *trainer.TrainJob, waiting string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"podSets": []any{map[string]any{"name": "node", "template": map[string]any{"spec": map[string]any{}}}}},
		"status": map[string]any{"conditions": []any{map[string]any{
			"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": waiting, "lastTransitionTime": "2026-01-01T00:00:00Z",
		}}},
	}}
	u.SetGroupVersionKind(trainjob.WorkloadGVK)
	u.SetNamespace(tj.Namespace)
	u.SetName("trainjob-" + tj.Name)
	u.SetLabels(map[string]string{trainjob.LabelKueueJobUID: string(tj.UID)})
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: trainer.GroupVersion.String(), Kind: "TrainJob", Name: tj.Name, UID: tj.UID}})
	return u
}

func fakeDynamic(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{workloadGVR: trainjob.WorkloadGVK.Kind + "List"}, objs...)
}

// startedWorkloads is a workloads running until the test ends, its log in the returned buffer.
func startedWorkloads(t *testing.T, c *dynamicfake.FakeDynamicClient, wake func(any)) (*workloads, *bytes.Buffer) {
	t.Helper()
	var log bytes.Buffer
	if wake == nil {
		wake = func(any) {}
	}
	w := newWorkloads(c, testNS, slog.New(slog.NewTextHandler(&log, nil)), time.Minute, wake)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w.run(ctx)
	return w, &log
}

func TestWorkloadsAreReadOnlyWhileTheyMatter(t *testing.T) {
	started := map[string]string{trainjob.AnnotationStartedAt: "2026-01-01T00:00:00Z"}
	notQueued := queuedJob("plain", nil)
	notQueued.Labels = nil
	cases := map[string]struct {
		tj          *trainer.TrainJob
		wantWaiting string // "" → no Workload, and no request made
	}{
		"not queued":               {tj: notQueued},
		"queued, started, running": {tj: queuedJob("running", started)},
		"queued, not started":      {tj: queuedJob("queued", nil), wantWaiting: "insufficient quota"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := fakeDynamic(workloadOf(tc.tj, "insufficient quota"), workloadOf(queuedJob("other", nil), "another job's words"))
			w, _ := startedWorkloads(t, c, nil)
			got := w.of(t.Context(), tc.tj)
			if tc.wantWaiting == "" {
				assert.Nil(t, got)
				assert.Empty(t, c.Actions(), "a look that needs no Workload makes no request")
				return
			}
			require.NotNil(t, got)
			assert.Equal(t, tc.wantWaiting, got.Waiting)
			before := len(c.Actions())
			for range 10 {
				require.NotNil(t, w.of(t.Context(), tc.tj))
			}
			assert.Len(t, c.Actions(), before, "later looks read the informer, not the apiserver")
		})
	}
}

func TestWorkloadsGiveUpOnceWhenRefused(t *testing.T) {
	gr := workloadGVR.GroupResource()
	cases := map[string]error{
		"forbidden":      apierrors.NewForbidden(gr, "", nil),
		"API not served": apierrors.NewNotFound(gr, ""),
	}
	for name, refusal := range cases {
		t.Run(name, func(t *testing.T) {
			tj := queuedJob("queued", nil)
			c := fakeDynamic(workloadOf(tj, "insufficient quota"))
			c.PrependReactor("list", "workloads", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, refusal })
			c.PrependWatchReactor("workloads", func(clienttesting.Action) (bool, watch.Interface, error) { return true, nil, refusal })
			w, log := startedWorkloads(t, c, nil)
			assert.Nil(t, w.of(t.Context(), tj))
			requests := len(c.Actions())
			for range 5 {
				assert.Nil(t, w.of(t.Context(), tj), "the step follows its TrainJob alone")
			}
			assert.Len(t, c.Actions(), requests, "a refusal is not asked again at every look")
			assert.Equal(t, 1, strings.Count(log.String(), "not reading Kueue's Workloads"), log.String())
		})
	}
}

func TestWorkloadChangeWakesItsTrainJob(t *testing.T) {
	tj := queuedJob("queued", nil)
	c := fakeDynamic()
	woken := make(chan []string, 8)
	w, _ := startedWorkloads(t, c, func(o any) {
		if u, ok := o.(*unstructured.Unstructured); ok {
			woken <- workloadTrainJobs(u)
		}
	})
	assert.Nil(t, w.of(t.Context(), tj), "Kueue has not made it yet")
	_, err := c.Resource(workloadGVR).Namespace(testNS).Create(t.Context(), workloadOf(tj, "insufficient quota"), metav1.CreateOptions{})
	require.NoError(t, err)
	select {
	case names := <-woken:
		assert.Equal(t, []string{tj.Name}, names)
	case <-time.After(30 * time.Second):
		t.Fatal("a new Workload must wake its TrainJob's held calls")
	}
	got := w.of(t.Context(), tj)
	require.NotNil(t, got)
	assert.Equal(t, "insufficient quota", got.Waiting)
}

func TestTrimmedWorkloadKeepsNoPodSets(t *testing.T) {
	tj := queuedJob("queued", nil)
	c := fakeDynamic(workloadOf(tj, "insufficient quota"))
	w, _ := startedWorkloads(t, c, nil)
	require.NotNil(t, w.of(t.Context(), tj))
	objs, err := w.cur.Load().informer.GetIndexer().ByIndex(indexWorkloadJob, string(tj.UID))
	require.NoError(t, err)
	require.Len(t, objs, 1)
	u := objs[0].(*unstructured.Unstructured)
	_, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "podSets")
	assert.False(t, found, "the pod templates (the training script) are not cached")
	assert.Nil(t, u.GetManagedFields())
}

func TestFailingWorkloadListHoldsUpOnlyTheFirstLook(t *testing.T) {
	tj := queuedJob("queued", nil)
	c := fakeDynamic(workloadOf(tj, "insufficient quota"))
	broken := apierrors.NewInternalError(assert.AnError) // retried: not a refusal
	c.PrependReactor("list", "workloads", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, broken })
	c.PrependWatchReactor("workloads", func(clienttesting.Action) (bool, watch.Interface, error) { return true, nil, broken })
	var log bytes.Buffer
	w := newWorkloads(c, testNS, slog.New(slog.NewTextHandler(&log, nil)), time.Hour, func(any) {})
	w.run(t.Context())
	// The look that starts the informer waits for its list (here: until its call ends).
	first, cancel := context.WithCancel(t.Context())
	cancel()
	assert.Nil(t, w.of(first, tj))
	// Had a later look waited too, it would wait the hour.
	for range 3 {
		assert.Nil(t, w.of(t.Context(), tj), "the step follows its TrainJob alone meanwhile")
	}
	assert.Empty(t, log.String(), "a failure that may pass is not a refusal")
}
