package trainjob

import (
	"context"
	"errors"
	"fmt"
	"sort"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrNameTaken means a TrainJob with our deterministic name exists but belongs to someone else.
var ErrNameTaken = errors.New("a TrainJob with this name exists and was not created by this step")

// Client is what submitting needs: read (from a cache in long-running faces) and create.
type Client interface {
	client.Reader
	Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error
}

// Submit creates the TrainJob once. If a job of that name exists and carries the same identity
// it is returned as it is (created=false): a replayed call, a restarted face or a retried
// command all land on the same job. Racing submitters are settled by the apiserver's
// AlreadyExists.
//
// It creates first and reads only when the create fails, so a new job (the common case: the
// faces find a tracked job in their caches before they get here) costs one request, whatever
// c reads from. A replay costs the refused create and a read. The read also follows refusals
// other than AlreadyExists: admission (a quota, a webhook) can refuse a replayed create before
// the store sees the name, and the job that exists is still the step's.
//
// tj is a *trainer.TrainJob, or the unstructured form Plan.Object makes for fields the typed API
// no longer has (Trainer v2.1's podTemplateOverrides).
func Submit(ctx context.Context, c Client, tj client.Object, id Identity) (*trainer.TrainJob, bool, error) {
	created, ok := tj.DeepCopyObject().(client.Object)
	if !ok {
		return nil, false, fmt.Errorf("TrainJob %s/%s cannot be copied", tj.GetNamespace(), tj.GetName())
	}
	err := c.Create(ctx, created)
	if err == nil {
		return typed(created)
	}
	existing := &trainer.TrainJob{}
	rerr := c.Get(ctx, client.ObjectKeyFromObject(tj), existing)
	switch {
	case rerr == nil:
		return adopt(existing, id)
	case apierrors.IsAlreadyExists(err):
		return nil, false, fmt.Errorf("reading TrainJob %s/%s created concurrently: %w", tj.GetNamespace(), tj.GetName(), rerr)
	}
	return nil, false, fmt.Errorf("creating TrainJob %s/%s: %w", tj.GetNamespace(), tj.GetName(), err)
}

// typed returns the created object as a TrainJob (an unstructured one is converted; the fields
// the typed API lacks are dropped from the copy, not from the cluster).
func typed(obj client.Object) (*trainer.TrainJob, bool, error) {
	if tj, ok := obj.(*trainer.TrainJob); ok {
		return tj, true, nil
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, false, fmt.Errorf("unexpected TrainJob type %T", obj)
	}
	tj := &trainer.TrainJob{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, tj); err != nil {
		return nil, false, fmt.Errorf("reading created TrainJob %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return tj, true, nil
}

func adopt(existing *trainer.TrainJob, id Identity) (*trainer.TrainJob, bool, error) {
	if !id.Owns(existing.Labels) {
		return nil, false, fmt.Errorf("%w: %s/%s (labels %v); delete it or run the step under another name",
			ErrNameTaken, existing.Namespace, existing.Name, sortedLabels(existing.Labels))
	}
	return existing, false, nil
}

func sortedLabels(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
