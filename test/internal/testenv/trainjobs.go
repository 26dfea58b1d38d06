package testenv

import (
	"context"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TrainJobs lists the TrainJobs of a namespace (narrowed by opts, e.g. an owner label). A failed
// list is reported through t.Errorf, so it works in a test and in an EventuallyWithT collector.
func TrainJobs(ctx context.Context, t interface{ Errorf(string, ...any) }, c client.Reader, ns string, opts ...client.ListOption) []trainer.TrainJob {
	l := &trainer.TrainJobList{}
	if err := c.List(ctx, l, append([]client.ListOption{client.InNamespace(ns)}, opts...)...); err != nil {
		t.Errorf("listing the TrainJobs of %s: %v", ns, err)
	}
	return l.Items
}
