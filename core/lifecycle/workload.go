package lifecycle

import (
	"context"
	"fmt"
	"sync"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
)

// workloadWatch follows the Kueue Workload of a queued TrainJob (selected by the job-uid label
// Kueue puts on it), for Decide's Snapshot.Workload. It is best effort: a cluster without Kueue's
// CRDs, or a caller that may not read Workloads, leaves the step following the TrainJob alone
// (its message then says only that the job is suspended).
type workloadWatch struct {
	inf    cache.SharedIndexInformer
	cancel context.CancelFunc
}

// watchWorkload starts the watch of tj's Workload; changes poke changed. onWarning is told once
// why the Workload cannot be read.
func watchWorkload(ctx context.Context, c client.WithWatch, tj *trainer.TrainJob, changed chan struct{}, onWarning func(error)) *workloadWatch {
	ctx, cancel := context.WithCancel(ctx)
	inf := cache.NewSharedIndexInformer(listWatch(c, trainjob.NewWorkloadList(), tj.Namespace, func(o *metav1.ListOptions) {
		o.LabelSelector = labels.Set{trainjob.LabelKueueJobUID: string(tj.UID)}.String()
	}), &unstructured.Unstructured{}, 0, cache.Indexers{})
	poked := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke(changed) },
		UpdateFunc: func(any, any) { poke(changed) },
		DeleteFunc: func(any) { poke(changed) },
	}
	if _, err := inf.AddEventHandler(poked); err != nil {
		cancel()
		return nil
	}
	var once sync.Once
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		if !apierrors.IsForbidden(err) && !apierrors.IsNotFound(err) && !apimeta.IsNoMatchError(err) {
			return // the reflector retries
		}
		once.Do(func() {
			if onWarning != nil {
				onWarning(fmt.Errorf("not reading Kueue's Workload of TrainJob %s/%s (its messages and counts are left out): %w", tj.Namespace, tj.Name, err))
			}
			cancel()
		})
	})
	go inf.RunWithContext(ctx)
	return &workloadWatch{inf: inf, cancel: cancel}
}

// workload is tj's Workload as the watch has it; nil before the watch syncs or without one.
func (ww *workloadWatch) workload(tj *trainer.TrainJob) *trainjob.Workload {
	if ww == nil {
		return nil
	}
	return trainjob.WorkloadOf(tj, listOf[unstructured.Unstructured](ww.inf.GetStore()))
}

func (ww *workloadWatch) stop() {
	if ww != nil {
		ww.cancel()
	}
}
