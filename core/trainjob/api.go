package trainjob

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TrainJobCRD is the CustomResourceDefinition whose schema says what the installed Trainer takes.
const TrainJobCRD = "trainjobs.trainer.kubeflow.org"

// Pod-template mechanisms, as a TrainJob carries them.
const (
	// PodRuntimePatches is spec.runtimePatches, keyed by manager (Trainer v2.2+).
	PodRuntimePatches = "runtimePatches"
	// PodTemplateOverrides is spec.podTemplateOverrides (Trainer v2.1).
	PodTemplateOverrides = "podTemplateOverrides"
)

// API is what the installed Trainer's TrainJob accepts, read from its CRD's OpenAPI schema: the
// fields that came and went between v2.0 and v2.3, and the command item limit.
type API struct {
	// PodMechanism is PodRuntimePatches or PodTemplateOverrides; empty when the TrainJob has
	// neither (Trainer v2.0's podSpecOverrides is not supported).
	PodMechanism string
	// ActiveDeadline: spec.activeDeadlineSeconds exists (v2.2+).
	ActiveDeadline bool
	// GracePeriod: spec.runtimePatches' pod spec takes terminationGracePeriodSeconds (v2.3+).
	GracePeriod bool
	// MaxCommandItem is the longest spec.trainer.command item accepted.
	MaxCommandItem int
	// Source says where this came from, for --dry-run and messages.
	Source string
}

// Command item limits: v2.2 caps items at 64 KiB, v2.3 at 1 MiB; v2.0/2.1 have no cap, and
// trainstep keeps them at 64 KiB as it always did (an etcd object is at most 1.5 MiB in all).
const (
	CommandItemV22 = 65536
	CommandItemV23 = 1 << 20
)

// AssumedAPI is used with no cluster (--local, stock runtimes): Trainer v2.3.
var AssumedAPI = API{PodMechanism: PodRuntimePatches, ActiveDeadline: true, GracePeriod: true, MaxCommandItem: CommandItemV23, Source: "assumed Trainer v2.3 (no cluster)"}

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// DetectAPI reads the TrainJob CRD through the apiserver (apiextensions) and derives the API.
// The reader needs get on customresourcedefinitions/trainjobs.trainer.kubeflow.org.
func DetectAPI(ctx context.Context, r client.Reader) (API, error) {
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(crdGVK)
	if err := r.Get(ctx, client.ObjectKey{Name: TrainJobCRD}, crd); err != nil {
		return API{}, fmt.Errorf("reading CustomResourceDefinition %s to learn what the installed Trainer accepts (grant get on customresourcedefinitions %s): %w", TrainJobCRD, TrainJobCRD, err)
	}
	return APIFromCRD(crd)
}

// APIFromCRD reads the API from a TrainJob CRD: the version served and stored.
func APIFromCRD(crd *unstructured.Unstructured) (API, error) {
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		vm, ok := v.(map[string]any)
		if !ok || vm["name"] != "v1alpha1" {
			continue
		}
		spec, _, _ := unstructured.NestedMap(vm, "schema", "openAPIV3Schema", "properties", "spec", "properties")
		api := API{MaxCommandItem: CommandItemV22}
		_, patches := spec["runtimePatches"]
		_, overrides := spec["podTemplateOverrides"]
		switch {
		case patches:
			api.PodMechanism = PodRuntimePatches
		case overrides:
			api.PodMechanism = PodTemplateOverrides
		}
		_, api.ActiveDeadline = spec["activeDeadlineSeconds"]
		api.GracePeriod = patches && hasProperty(spec["runtimePatches"], "terminationGracePeriodSeconds")
		if n, ok, _ := unstructured.NestedInt64(spec, "trainer", "properties", "command", "items", "maxLength"); ok && n > 0 {
			api.MaxCommandItem = int(n)
		}
		api.Source = fmt.Sprintf("CRD %s: %s", TrainJobCRD, api.describe())
		return api, nil
	}
	return API{}, fmt.Errorf("CustomResourceDefinition %s has no v1alpha1 version", TrainJobCRD)
}

// hasProperty says whether a schema names the property anywhere below it: runtimePatches nests
// the pod spec nine levels down, and only the field's presence matters.
func hasProperty(node any, name string) bool {
	switch v := node.(type) {
	case map[string]any:
		if props, ok := v["properties"].(map[string]any); ok {
			if _, ok := props[name]; ok {
				return true
			}
		}
		for _, child := range v {
			if hasProperty(child, name) {
				return true
			}
		}
	case []any:
		for _, child := range v {
			if hasProperty(child, name) {
				return true
			}
		}
	}
	return false
}

func (a API) describe() string {
	switch {
	case a.PodMechanism == PodRuntimePatches && a.MaxCommandItem >= CommandItemV23:
		return "Trainer v2.3+ (spec.runtimePatches, spec.activeDeadlineSeconds, command items up to 1 MiB)"
	case a.PodMechanism == PodRuntimePatches:
		return fmt.Sprintf("Trainer v2.2 (spec.runtimePatches, spec.activeDeadlineSeconds, command items up to %d)", a.MaxCommandItem)
	case a.PodMechanism == PodTemplateOverrides:
		return "Trainer v2.1 (spec.podTemplateOverrides; no activeDeadlineSeconds)"
	}
	return "Trainer v2.0 (no pod template mechanism trainstep supports)"
}

// APIDetector remembers DetectAPI's answer for TTL, so a long-running face reads the CRD once a
// minute rather than once a step, and still sees a Trainer upgrade.
type APIDetector struct {
	Reader client.Reader
	TTL    time.Duration

	mu  sync.Mutex
	api *API
	at  time.Time
}

// Get returns the installed Trainer's API, read again once TTL has passed.
func (d *APIDetector) Get(ctx context.Context) (API, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ttl := d.TTL
	if ttl == 0 {
		ttl = time.Minute
	}
	if d.api != nil && time.Since(d.at) < ttl {
		return *d.api, nil
	}
	api, err := DetectAPI(ctx, d.Reader)
	if err != nil {
		return API{}, err
	}
	d.api, d.at = &api, time.Now()
	return api, nil
}
