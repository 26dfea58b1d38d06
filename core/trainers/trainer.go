// Package trainers is KEP-285's trainer hierarchy in Go: each trainer declares the frameworks it
// runs on (in preference order), checks a runtime, and turns its fields into the parts of a
// TrainJob's spec.trainer. Trainers are registered in a Registry, so a new one needs no change here.
package trainers

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/step"
)

// Trainer is KEP-285's BaseTrainer.
type Trainer interface {
	runtimes.Trainer
	// Build renders the trainer for the chosen runtime. rc is the step's RuntimeConfig (may be
	// nil); its set fields replace the trainer's own.
	Build(rt *runtimes.Runtime, rc *step.RuntimeConfig) (Parts, field.ErrorList)
}

// Parts is what a trainer contributes to spec.trainer (the fields stable from Trainer v2.0 to v2.3,
// plus numProcPerNode whose integer form is accepted by all of them).
type Parts struct {
	Image          string
	Command        []string
	Args           []string
	Env            []corev1.EnvVar
	NumNodes       *int32
	Resources      *corev1.ResourceRequirements
	NumProcPerNode *int32
}

var trainerPath = field.NewPath("trainer")

// Common holds the fields every trainer has (BaseTrainer's num_nodes, resources_per_node, image,
// and CustomTrainer's env).
type Common struct {
	NumNodes         *int32         `json:"numNodes,omitempty"`
	ResourcesPerNode map[string]any `json:"resourcesPerNode,omitempty"`
	Image            string         `json:"image,omitempty"`
	Env              step.Env       `json:"env,omitzero"`
}

func (c *Common) validate() field.ErrorList {
	var errs field.ErrorList
	if c.NumNodes != nil && *c.NumNodes < 1 {
		errs = append(errs, field.Invalid(trainerPath.Child("numNodes"), *c.NumNodes, "must be 1 or more"))
	}
	if _, e := resources(c.ResourcesPerNode); len(e) > 0 {
		errs = append(errs, e...)
	}
	if c.Image != "" && strings.ContainsAny(c.Image, " \t\n") {
		errs = append(errs, field.Invalid(trainerPath.Child("image"), c.Image, "must be an image reference such as ghcr.io/org/train:1.0"))
	}
	errs = append(errs, step.ValidateEnv(c.Env, trainerPath.Child("env"))...)
	return errs
}

// apply fills the parts every trainer shares. env is the final environment, in order.
func (c *Common) apply(p *Parts, env step.Env) {
	p.Image = c.Image
	p.NumNodes = c.NumNodes
	p.Resources, _ = resources(c.ResourcesPerNode)
	p.Env = envList(env)
}

// resources maps the SDK's resources_per_node to identical requests and limits, with its aliases
// (gpu → nvidia.com/gpu, storage → ephemeral-storage, mig-<profile> → nvidia.com/mig-<profile>).
// Names are checked here against Kubernetes' rules for a container's resources, because past
// here a bad one is refused only when JobSet creates the Job, long after the step has started.
func resources(in map[string]any) (*corev1.ResourceRequirements, field.ErrorList) {
	if len(in) == 0 {
		return nil, nil
	}
	p := trainerPath.Child("resourcesPerNode")
	var errs field.ErrorList
	list := corev1.ResourceList{}
	mig := 0
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	given := map[corev1.ResourceName]string{}
	for _, k := range keys {
		name := resourceName(k)
		if msg := containerResourceProblem(name); msg != "" {
			errs = append(errs, field.Invalid(p.Key(k), k, msg))
			continue
		}
		if first, twice := given[name]; twice {
			errs = append(errs, field.Invalid(p.Key(k), k, fmt.Sprintf("%s and %s both name %s: give it once", first, k, name)))
			continue
		}
		given[name] = k
		if strings.HasPrefix(string(name), "nvidia.com/mig-") {
			mig++
		}
		q, err := quantity(in[k])
		if err != nil {
			errs = append(errs, field.Invalid(p.Key(k), in[k], err.Error()))
			continue
		}
		list[name] = q
	}
	if _, gpu := list["nvidia.com/gpu"]; mig > 1 || (mig == 1 && gpu) {
		errs = append(errs, field.Invalid(p, keys, "ask for one kind of GPU: either gpu or a single mig-<profile>"))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return &corev1.ResourceRequirements{Requests: list.DeepCopy(), Limits: list}, nil
}

// wellKnownResources are device plugins' resource names, matched in any case as the standard
// names are: each plugin advertises its name in lower case, so NVIDIA.com/GPU can only mean it.
var wellKnownResources = []string{
	"nvidia.com/gpu", "amd.com/gpu", "google.com/tpu", "habana.ai/gaudi",
	"aws.amazon.com/neuron", "aws.amazon.com/neuroncore", "gpu.intel.com/i915", "gpu.intel.com/xe",
}

// resourceName is k as Kubernetes spells it. The standard names, the SDK's aliases and the
// well-known device names are matched in any case, as the Kubeflow SDK matches them; a
// hugepages-<size> keeps its size as written (2Mi is not 2mi). Any other name keeps its name
// part as written, because extended resources are case-sensitive on the node (huawei.com/Ascend910
// is not huawei.com/ascend910), and only its domain is lower-cased: Kubernetes takes a domain
// only in lower case, so that can turn no valid name into another.
func resourceName(k string) corev1.ResourceName {
	lower := strings.ToLower(k)
	switch {
	case lower == "cpu", lower == "memory", lower == "ephemeral-storage":
		return corev1.ResourceName(lower)
	case lower == "gpu":
		return "nvidia.com/gpu"
	case lower == "storage":
		return corev1.ResourceEphemeralStorage
	case strings.HasPrefix(lower, "mig-"), strings.HasPrefix(lower, "nvidia.com/mig-"):
		return corev1.ResourceName("nvidia.com/" + strings.TrimPrefix(lower, "nvidia.com/"))
	case strings.HasPrefix(lower, corev1.ResourceHugePagesPrefix):
		return corev1.ResourceName(corev1.ResourceHugePagesPrefix + k[len(corev1.ResourceHugePagesPrefix):])
	case slices.Contains(wellKnownResources, lower):
		return corev1.ResourceName(lower)
	}
	if domain, rest, ok := strings.Cut(k, "/"); ok {
		return corev1.ResourceName(strings.ToLower(domain) + "/" + rest)
	}
	return corev1.ResourceName(k)
}

// containerResourceProblem says why Kubernetes would refuse name as a container's resource (its
// validateContainerResourceName and, for huge pages, the page size), or "" when it would not.
func containerResourceProblem(name corev1.ResourceName) string {
	const what = "must be cpu, memory, ephemeral-storage, hugepages-<size>, gpu, storage, mig-<profile> or a resource name such as example.com/device"
	n := string(name)
	if size, ok := strings.CutPrefix(n, corev1.ResourceHugePagesPrefix); ok {
		if q, err := resource.ParseQuantity(size); err != nil || q.Sign() <= 0 {
			return fmt.Sprintf("hugepages-<size> needs a page size such as 2Mi or 1Gi, not %q", size)
		}
	}
	if msgs := validation.IsQualifiedName(n); len(msgs) > 0 {
		return what + ": " + strings.Join(msgs, "; ")
	}
	if strings.HasPrefix(n, corev1.ResourceHugePagesPrefix) {
		return ""
	}
	if !strings.Contains(n, "/") {
		switch name {
		case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
			return ""
		}
		return "a name without a domain must be cpu, memory, ephemeral-storage, hugepages-<size> or an alias (gpu, storage, " +
			"mig-<profile>); any other resource needs its domain, such as example.com/" + n
	}
	// An extended resource is also a quota name, requests.<name>, so it must stay a valid name
	// with that prefix (Kubernetes' IsExtendedResourceName); kubernetes.io/ names are native.
	if strings.Contains(n, corev1.ResourceDefaultNamespacePrefix) {
		return ""
	}
	if strings.HasPrefix(n, corev1.DefaultResourceRequestsPrefix) || len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+n)) > 0 {
		return "is not a valid extended resource name: it must not start with requests., and requests.<name> must be a valid name, such as requests.example.com/device"
	}
	return ""
}

// quantity is a resource amount as the step gives it: a number or a string such as 500m or 16Gi.
func quantity(v any) (resource.Quantity, error) {
	var text string
	switch v := v.(type) {
	case json.Number:
		text = v.String()
	case string:
		text = v
	default:
		return resource.Quantity{}, errors.New("must be a quantity such as 2, 500m or 16Gi")
	}
	q, err := resource.ParseQuantity(text)
	if err != nil || q.Sign() < 0 {
		return resource.Quantity{}, errors.New("must be a quantity such as 2, 500m or 16Gi")
	}
	return q, nil
}

// envList keeps the order: Kubernetes expands $(VAR) only from earlier entries.
func envList(env step.Env) []corev1.EnvVar {
	if len(env) == 0 {
		return nil
	}
	out := make([]corev1.EnvVar, len(env))
	for i, e := range env {
		out[i] = corev1.EnvVar{Name: e.Name, Value: e.Value}
	}
	return out
}

// mergeEnv is KEP-285's field-level merge: a set runtimeConfig.env replaces the trainer's env.
func mergeEnv(own step.Env, rc *step.RuntimeConfig) (step.Env, *field.Path) {
	if rc != nil && rc.Env != nil {
		return slices.Clone(rc.Env), field.NewPath("runtimeConfig", "env")
	}
	return slices.Clone(own), trainerPath.Child("env")
}
