package runtimes

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Catalog is every runtime a step in one namespace can see.
type Catalog struct {
	Runtimes []Runtime
	Skipped  []Skipped
}

// Source lists the runtimes visible from a namespace.
type Source interface {
	List(ctx context.Context, namespace string) (Catalog, error)
}

// ClusterSource reads runtimes through a client.Reader: a direct client for one-shot commands, a
// cache-backed one (informers) for the long-running faces, so a step costs no LIST.
type ClusterSource struct {
	Reader client.Reader
}

var _ Source = ClusterSource{}

// List returns the ClusterTrainingRuntimes and the namespace's TrainingRuntimes; a namespaced
// runtime hides a cluster one of the same name, as in the SDK.
func (s ClusterSource) List(ctx context.Context, namespace string) (Catalog, error) {
	cluster, err := s.list(ctx, ClusterKind, "")
	if err != nil {
		return Catalog{}, err
	}
	namespaced, err := s.list(ctx, NamespacedKind, namespace)
	if err != nil {
		return Catalog{}, err
	}
	return NewCatalog(append(namespaced, cluster...)), nil
}

func (s ClusterSource) list(ctx context.Context, kind, namespace string) ([]unstructured.Unstructured, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(schema.GroupVersionKind{Group: Group, Version: Version, Kind: kind + "List"})
	var opts []client.ListOption
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	if err := s.Reader.List(ctx, l, opts...); err != nil {
		if apimeta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("listing %ss: the Kubeflow Trainer CRDs are not installed in this cluster: %w", kind, err)
		}
		return nil, fmt.Errorf("listing %ss: %w", kind, err)
	}
	return l.Items, nil
}

// NewCatalog reads runtime objects, namespaced ones first so they win a name clash.
func NewCatalog(objs []unstructured.Unstructured) Catalog {
	var c Catalog
	seen := map[string]string{}
	for i := range objs {
		u := &objs[i]
		if u.GetDeletionTimestamp() != nil {
			// Trainer v2.0–v2.2 keeps a deleted runtime (its finalizer) until no TrainJob uses
			// it: replacing a runtime would otherwise make two of one framework for that long.
			c.Skipped = append(c.Skipped, Skipped{Name: u.GetName(), Kind: u.GetKind(), Reason: "being deleted (kept by the Trainer until the TrainJobs using it are gone)"})
			continue
		}
		r, err := FromUnstructured(u)
		if err != nil {
			c.Skipped = append(c.Skipped, Skipped{Name: u.GetName(), Kind: u.GetKind(), Reason: err.Error()})
			continue
		}
		if by, ok := seen[u.GetName()]; ok && u.GetKind() == ClusterKind {
			r.HiddenBy = fmt.Sprintf("%s %s/%s", NamespacedKind, by, u.GetName())
		}
		if u.GetKind() == NamespacedKind {
			seen[u.GetName()] = u.GetNamespace()
		}
		c.Runtimes = append(c.Runtimes, *r)
	}
	sort.Slice(c.Runtimes, func(i, j int) bool { return c.Runtimes[i].Name < c.Runtimes[j].Name })
	sort.Slice(c.Skipped, func(i, j int) bool { return c.Skipped[i].Name < c.Skipped[j].Name })
	return c
}
