package argo

import (
	"context"
	"fmt"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
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

// podsLabelled reports whether the installed Trainer puts trainstep's pod labels
// (trainjob.PodLabels) on the pods of the TrainJobs trainstep submits: it has a pod-template
// mechanism (v2.1+). Then the sidecar caches only its own workflow's pods; on Trainer v2.0, or
// when the CRD cannot be read, it caches every JobSet pod of the namespace, as it must to see its
// own.
func podsLabelled(api client.Reader) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), workflowLookupTimeout)
	defer cancel()
	a, err := trainjob.DetectAPI(ctx, api)
	if err != nil {
		return false, err
	}
	return a.PodMechanism != "", nil
}

// cachedObjects reports how many objects of a kind the sidecar's cache holds: with --workflow,
// only its own workflow's TrainJobs (and pods, on Trainer v2.1+).
func cachedObjects(c cache.Cache, name, help string, list client.ObjectList) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := c.List(ctx, list); err != nil {
			return -1
		}
		return float64(meta.LenList(list))
	})
}
