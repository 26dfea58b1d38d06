package tekton_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// foreignWorkloads is how many Workloads of other jobs the namespace holds in
// TestWorkloadCacheKeepsOnlyWhatTheFaceReads: enough for the heap per Workload to stand out
// from the collector's noise. The figure beside 5,000 is BenchmarkTektonWorkloadCache's
// (make bench), which need not run on every change.
const foreignWorkloads = 1000

// scriptBytes is the size of the script in each Workload's pod template. Kueue copies a job's
// pod templates into its Workload, and a TrainJob's, or another job's, carries its training
// script in its command (up to 1 MiB).
const scriptBytes = 20 << 10

// In a namespace where Kueue queues thousands of jobs that are not trainstep's, the controller's
// cache holds of their Workloads only enough to map and skip them (no pod sets: not their
// scripts), and of a TrainJob's Workload what ReadWorkload reads.
func TestWorkloadCacheKeepsOnlyWhatTheFaceReads(t *testing.T) {
	ns := env.Namespace(t)
	tj := createQueuedTrainJob(t, ns)
	ours := createTrainJobWorkload(t, tj)
	ctrl := startController(t, ns)
	waitCached(t, ctrl.Cache, ns, 1)

	// What the cache holds of the foreign Workloads is the heap their arrival adds and keeps.
	heap := cacheHeap(t, func() {
		createForeignWorkloads(t, ns, foreignWorkloads)
		waitCached(t, ctrl.Cache, ns, foreignWorkloads+1)
	})
	perWorkload := heap / foreignWorkloads
	t.Logf("the controller's cache with %d foreign Workloads (a %d KiB script in each): %.1f MiB of heap, %.2f KiB per Workload",
		foreignWorkloads, scriptBytes>>10, float64(heap)/(1<<20), float64(perWorkload)/1024)
	// Whole, each holds at least its script (about 27 KiB in all); trimmed, its identity alone
	// (2-3 KiB as measured, the rest of the bound is room for the collector's leftovers).
	assert.Less(t, perWorkload, int64(scriptBytes/3), "heap per foreign Workload")

	l := trainjob.NewWorkloadList()
	require.NoError(t, ctrl.Cache.List(t.Context(), l, client.InNamespace(ns)))
	require.Len(t, l.Items, foreignWorkloads+1)
	var whole, unowned int
	for _, w := range l.Items {
		if w.GetUID() == ours.GetUID() {
			continue
		}
		if _, ok := w.Object["spec"]; ok {
			whole++
		}
		if len(w.GetOwnerReferences()) == 0 {
			unowned++
		}
	}
	assert.Zero(t, whole, "foreign Workloads cached with their spec (pod sets, scripts)")
	assert.Zero(t, unowned, "foreign Workloads cached without the owners that map them")

	got, err := trainjob.FindWorkload(t.Context(), ctrl.Cache, tj)
	require.NoError(t, err)
	want := trainjob.ReadWorkload(ours)
	assert.Equal(t, want, got, "what the face reads of the TrainJob's Workload, from its cache")
	assert.NotEmpty(t, want.Waiting, "the test's Workload says why it waits")
	cached := findCached(t, l.Items, ours.GetUID())
	_, hasPodSets, _ := unstructured.NestedFieldNoCopy(cached.Object, "spec", "podSets")
	assert.False(t, hasPodSets, "the TrainJob's Workload is cached without its pod sets (its script)")
}

func findCached(t *testing.T, items []unstructured.Unstructured, uid types.UID) *unstructured.Unstructured {
	t.Helper()
	for i := range items {
		if items[i].GetUID() == uid {
			return &items[i]
		}
	}
	t.Fatalf("the TrainJob's Workload (uid %s) is not in the controller's cache", uid)
	return nil
}

// createForeignWorkloads makes n Workloads as Kueue makes them for batch/v1 Jobs of other
// teams: labelled with the job's UID, owned by it, each with a pod set whose template carries a
// script of scriptBytes. One real Job owns them all, so the garbage collector keeps them.
func createForeignWorkloads(t testing.TB, ns string, n int) {
	t.Helper()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "other-team", Namespace: ns},
		Spec: batchv1.JobSpec{Suspend: ptr(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "main", Image: "python:3.12"}},
		}}},
	}
	require.NoError(t, c.Create(t.Context(), job))
	owner := metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr(true)}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("job-other-team-%05d", i)
	}
	start := time.Now()
	parallel(t, names, 16, func(name string) error {
		return c.Create(t.Context(), workload(ns, name, job.UID, owner))
	})
	t.Logf("%d foreign Workloads created in %s", n, time.Since(start).Round(time.Millisecond))
}

// createQueuedTrainJob makes a TrainJob as Kueue holds one in its queue: labelled with its
// LocalQueue, suspended. The simulator leaves it so: a suspended JobSet has no pods.
func createQueuedTrainJob(t *testing.T, ns string) *trainer.TrainJob {
	t.Helper()
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "queued", Namespace: ns,
			Labels: map[string]string{SimMode: "hold", trainjob.LabelKueueQueue: "team-a"}},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"}, Suspend: ptr(true)},
	}
	require.NoError(t, c.Create(t.Context(), tj))
	return tj
}

// createTrainJobWorkload makes the Workload Kueue makes for tj, and records in its status that
// it waits for quota, as Kueue does.
func createTrainJobWorkload(t *testing.T, tj *trainer.TrainJob) *unstructured.Unstructured {
	t.Helper()
	owner := metav1.OwnerReference{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind,
		Name: tj.Name, UID: tj.UID, Controller: ptr(true)}
	w := workload(tj.Namespace, "trainjob-"+tj.Name+"-1a2b3", tj.UID, owner)
	require.NoError(t, c.Create(t.Context(), w))
	w.Object["status"] = map[string]any{"conditions": []any{map[string]any{
		"type": "QuotaReserved", "status": "False", "reason": "Pending",
		"message":            "couldn't assign flavors to pod set node: insufficient quota for nvidia.com/gpu in flavor a100, request > maximum capacity (8 > 4)",
		"lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339),
	}}}
	require.NoError(t, c.Status().Update(t.Context(), w))
	return w
}

// workload is a Kueue v1beta2 Workload for the job uid, owned by owner, with one pod set whose
// template carries a script of scriptBytes.
func workload(ns, name string, uid types.UID, owner metav1.OwnerReference) *unstructured.Unstructured {
	w := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"queueName": "team-a",
			"podSets": []any{map[string]any{
				"name": "main", "count": int64(1),
				"template": map[string]any{"spec": map[string]any{
					"restartPolicy": "Never",
					"containers": []any{map[string]any{
						"name": "main", "image": "python:3.12",
						"command":   []any{"python", "-c", script(name)},
						"resources": map[string]any{"requests": map[string]any{"cpu": "1"}},
					}},
				}},
			}},
		},
	}}
	w.SetGroupVersionKind(trainjob.WorkloadGVK)
	w.SetNamespace(ns)
	w.SetName(name)
	w.SetLabels(map[string]string{trainjob.LabelKueueJobUID: string(uid)})
	w.SetOwnerReferences([]metav1.OwnerReference{owner})
	return w
}

// script is a training script of scriptBytes, its own for each job.
func script(job string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\nimport torch\n", job)
	for i := 0; b.Len() < scriptBytes; i++ {
		fmt.Fprintf(&b, "loss_%d = model(batch[%d]).sum(); loss_%d.backward(); optimizer.step()\n", i, i, i)
	}
	return b.String()[:scriptBytes]
}

// waitCached waits until r holds n Workloads of ns (without copying them: a copy of n whole
// Workloads per poll would be most of what the test measures).
func waitCached(t testing.TB, r client.Reader, ns string, n int) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		l := trainjob.NewWorkloadList()
		if assert.NoError(ct, r.List(context.WithoutCancel(t.Context()), l, client.InNamespace(ns), client.UnsafeDisableDeepCopy)) {
			assert.Len(ct, l.Items, n)
		}
	}, 2*testenv.Timeout, testenv.Interval)
}

// cacheHeap is the Go heap in use that fill adds and keeps (after a full collection each side):
// in this process, with nothing else starting meanwhile, what a cache fill builds holds.
func cacheHeap(t testing.TB, fill func()) int64 {
	t.Helper()
	before := heapInuse()
	fill()
	return int64(heapInuse()) - int64(before)
}

func heapInuse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
