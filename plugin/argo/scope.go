package argo

import (
	"context"
	"fmt"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// workflowLookupTimeout bounds the one read of the sidecar's Workflow at start.
const workflowLookupTimeout = 30 * time.Second

// workflowUID reads the UID of the workflow whose agent pod hosts this sidecar. Its TrainJobs
// carry it as trainstep.dev/owner-uid, so the cache holds only this workflow's TrainJobs. The
// Workflow exists before Argo makes its agent pod, so not finding it is an error.
func workflowUID(api client.Reader, namespace, name string) (types.UID, error) {
	ctx, cancel := context.WithTimeout(context.Background(), workflowLookupTimeout)
	defer cancel()
	wf := &wfv1.Workflow{}
	if err := api.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, wf); err != nil {
		return "", fmt.Errorf("reading workflow %s/%s (--workflow), whose TrainJobs this sidecar follows: %w", namespace, name, err)
	}
	return wf.UID, nil
}

// cachedTrainJobs reports how many TrainJobs the sidecar's cache holds: with --workflow, only its
// own workflow's, however many other workflows the namespace runs.
func cachedTrainJobs(c cache.Cache) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "trainstep_argo_cached_trainjobs",
		Help: "TrainJobs held in the plugin's informer cache (with --workflow, only that workflow's).",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		l := &trainer.TrainJobList{}
		if err := c.List(ctx, l); err != nil {
			return -1
		}
		return float64(len(l.Items))
	})
}
