// Package runtimes finds the (Cluster)TrainingRuntimes a step can run on, keyed by the
// trainer.kubeflow.org/framework label, and picks one the way KEP-285 says: an explicit runtime is
// validated, otherwise the trainer's frameworks are walked in preference order.
package runtimes

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Labels and values the Trainer and its SDK define.
const (
	FrameworkLabel     = "trainer.kubeflow.org/framework"
	SupportLabel       = "trainer.kubeflow.org/support"
	Deprecated         = "deprecated"
	AncestorLabel      = "trainer.kubeflow.org/trainjob-ancestor-step"
	AncestorTrainer    = "trainer"
	AncestorDataset    = "dataset-initializer"
	AncestorModel      = "model-initializer"
	NodeContainer      = "node"
	NodeJob            = "node"
	TorchTune          = "torchtune"
	ClusterKind        = "ClusterTrainingRuntime"
	NamespacedKind     = "TrainingRuntime"
	Group              = "trainer.kubeflow.org"
	Version            = "v1alpha1"
	DefaultMPIHome     = "/home/mpiuser"
	DefaultMPIHostfile = "/etc/mpi/hostfile"
)

// Policy is the runtime's mlPolicy source; it decides the entry point and the env the Trainer injects.
type Policy string

// Policies known up to Trainer v2.3. A runtime with none of them is Plain.
const (
	PolicyTorch   Policy = "torch"
	PolicyMPI     Policy = "mpi"
	PolicyJAX     Policy = "jax"
	PolicyXGBoost Policy = "xgboost"
	PolicyFlux    Policy = "flux"
	PolicyPlain   Policy = "plain"
)

// TrainerType is the SDK's trainer_type. It is not on the CR: like the SDK, trainstep derives it
// from the framework label (torchtune runtimes are built-in, everything else takes custom code).
type TrainerType string

// Trainer types, spelled as the SDK spells them.
const (
	CustomTrainer  TrainerType = "CustomTrainer"
	BuiltinTrainer TrainerType = "BuiltinTrainer"
)

// Runtime is what trainstep needs to know of a (Cluster)TrainingRuntime.
type Runtime struct {
	Name      string
	Namespace string // empty for a ClusterTrainingRuntime
	Kind      string
	Framework string
	Policy    Policy
	Type      TrainerType
	// NumNodes is mlPolicy.numNodes (default 1).
	NumNodes int32
	// MPINumProcPerNode is mlPolicy.mpi.numProcPerNode, when set.
	MPINumProcPerNode *int32
	// RunLauncherAsNode is mlPolicy.mpi.runLauncherAsNode.
	RunLauncherAsNode bool
	Deprecated        bool
	// The container named "node" of the replicated job labelled ancestor=trainer: what
	// spec.trainer overrides.
	Image   string
	Command []string
	Args    []string
	Env     []corev1.EnvVar
	// Device and DeviceCount describe the trainer container's accelerator, as the SDK lists them.
	Device      string
	DeviceCount string
	// Resources are what one node's container gets when the step's resourcesPerNode does not say
	// otherwise (its accelerators, core/trainjob cost.go): the "node" container of the replicated
	// job named node, where there is one (an MPI runtime's nodes; its trainer-labelled job is the
	// launcher), else of the trainer's. Not in the step cache's key (a Runtime is hashed whole
	// there, core/stepcache): Device and DeviceCount carry the accelerator into it already, and a
	// new field would change every key.
	Resources corev1.ResourceRequirements `json:"-"`
	// HasDatasetInitializer / HasModelInitializer: the runtime has those replicated jobs.
	HasDatasetInitializer bool
	HasModelInitializer   bool
	// ReplicatedJobs are the JobSet template's replicated jobs, in order: their names and sizes
	// bound the names of the pods JobSet makes, and so the TrainJob's name.
	ReplicatedJobs []ReplicatedJob
	// MaxCommandItem is the installed Trainer's command item limit, set by the planner from the
	// TrainJob CRD before a trainer builds against this runtime (0: unknown, keep to 64 KiB).
	MaxCommandItem int
	// HiddenBy is set on a ClusterTrainingRuntime that a TrainingRuntime of the same name in the
	// step's namespace hides: discovery and a bare name skip it, runtime.kind still reaches it.
	HiddenBy string
	// SpecHash is a hash of the object's whole spec (SpecHash), for the step cache's key.
	SpecHash string
}

// ReplicatedJob is what a replicated job of the runtime contributes to pod names.
type ReplicatedJob struct {
	Name string
	// Ancestor is its trainer.kubeflow.org/trainjob-ancestor-step label: trainer, dataset-initializer, …
	Ancestor string
	// Replicas is its replicas (default 1); Completions its job template's completions (default 1).
	// The Trainer sets the trainer job's completions to the TrainJob's node count.
	Replicas    int32
	Completions int32
	// Containers are the names of its pod template's containers.
	Containers []string
	// InitContainers counts its pod template's init containers (native sidecars included): the
	// kubelet splits a pod's termination messages between them too.
	InitContainers int
}

// TrainerPodContainers is how many containers, init containers included, the largest pod that
// runs the trainer has (a node, or an MPI launcher): what the kubelet divides the termination
// message room by. 1 when the runtime does not say.
func (r *Runtime) TrainerPodContainers() int {
	n := 1
	for _, rj := range r.ReplicatedJobs {
		if rj.Ancestor == AncestorTrainer || rj.Name == "launcher" || rj.Name == "node" {
			n = max(n, len(rj.Containers)+rj.InitContainers)
		}
	}
	return n
}

// Ref is "ClusterTrainingRuntime/torch-distributed" or "TrainingRuntime/team-a/custom".
func (r *Runtime) Ref() string {
	if r.Namespace != "" {
		return r.Kind + "/" + r.Namespace + "/" + r.Name
	}
	return r.Kind + "/" + r.Name
}

// Skipped is a runtime discovery cannot use, and why.
type Skipped struct {
	Name   string
	Kind   string
	Reason string
}

// FromUnstructured reads a runtime without a typed client, so fields newer than the pinned Trainer
// API (mlPolicy.jax on a v2.0 client, say) are seen rather than silently dropped.
func FromUnstructured(u *unstructured.Unstructured) (*Runtime, error) {
	r := &Runtime{
		Name:        u.GetName(),
		Namespace:   u.GetNamespace(),
		Kind:        u.GetKind(),
		Framework:   u.GetLabels()[FrameworkLabel],
		Deprecated:  u.GetLabels()[SupportLabel] == Deprecated,
		NumNodes:    1,
		Device:      "Unknown",
		DeviceCount: "Unknown",
	}
	r.SpecHash = SpecHash(u)
	if r.Framework == "" {
		return r, fmt.Errorf("no %s label", FrameworkLabel)
	}
	r.Type = CustomTrainer
	if r.Framework == TorchTune {
		r.Type = BuiltinTrainer
	}
	policy, found, _ := unstructured.NestedMap(u.Object, "spec", "mlPolicy")
	if !found {
		return r, fmt.Errorf("no spec.mlPolicy")
	}
	r.readPolicy(policy)
	jobs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "replicatedJobs")
	for _, j := range jobs {
		if job, ok := j.(map[string]any); ok {
			if err := r.readReplicatedJob(job); err != nil {
				return r, err
			}
		}
	}
	if r.Image == "" {
		return r, fmt.Errorf("no replicated job labelled %s=%s with a %q container that has an image", AncestorLabel, AncestorTrainer, NodeContainer)
	}
	if err := r.readNodeResources(jobs); err != nil {
		return r, err
	}
	return r, nil
}

// readPolicy reads spec.mlPolicy: the node count, the policy and MPI's settings.
func (r *Runtime) readPolicy(policy map[string]any) {
	if n, ok, _ := unstructured.NestedInt64(policy, "numNodes"); ok && n > 0 {
		r.NumNodes = int32(n)
	}
	r.Policy = PolicyPlain
	for _, p := range []Policy{PolicyTorch, PolicyMPI, PolicyJAX, PolicyXGBoost, PolicyFlux} {
		if _, ok := policy[string(p)]; ok {
			r.Policy = p
			break
		}
	}
	if r.Policy == PolicyMPI {
		if n, ok, _ := unstructured.NestedInt64(policy, "mpi", "numProcPerNode"); ok {
			v := int32(n)
			r.MPINumProcPerNode = &v
		}
		r.RunLauncherAsNode, _, _ = unstructured.NestedBool(policy, "mpi", "runLauncherAsNode")
	}
}

// readReplicatedJob reads one replicated job of the JobSet template: its share of pod names,
// which initializer it is, and, for the trainer's, its node container.
func (r *Runtime) readReplicatedJob(job map[string]any) error {
	ancestor, _, _ := unstructured.NestedString(job, "template", "metadata", "labels", AncestorLabel)
	rj := ReplicatedJob{Ancestor: ancestor, Replicas: 1, Completions: 1}
	rj.Name, _, _ = unstructured.NestedString(job, "name")
	if n, ok, _ := unstructured.NestedInt64(job, "replicas"); ok {
		rj.Replicas = int32(n)
	}
	if n, ok, _ := unstructured.NestedInt64(job, "template", "spec", "completions"); ok {
		rj.Completions = int32(n)
	}
	ctrs, _, _ := unstructured.NestedSlice(job, "template", "spec", "template", "spec", "containers")
	for _, c := range ctrs {
		if cm, ok := c.(map[string]any); ok {
			if n, ok := cm["name"].(string); ok {
				rj.Containers = append(rj.Containers, n)
			}
		}
	}
	inits, _, _ := unstructured.NestedSlice(job, "template", "spec", "template", "spec", "initContainers")
	rj.InitContainers = len(inits)
	r.ReplicatedJobs = append(r.ReplicatedJobs, rj)
	switch ancestor {
	case AncestorDataset:
		r.HasDatasetInitializer = true
	case AncestorModel:
		r.HasModelInitializer = true
	case AncestorTrainer:
		for _, c := range ctrs {
			if cm, ok := c.(map[string]any); ok && cm["name"] == NodeContainer {
				return r.readNodeContainer(cm)
			}
		}
	}
	return nil
}

// readNodeContainer reads the trainer's node container: what spec.trainer overrides, and the
// resources one node gets.
func (r *Runtime) readNodeContainer(cm map[string]any) error {
	var ctr corev1.Container
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(cm, &ctr); err != nil {
		return fmt.Errorf("reading its %q container: %w", NodeContainer, err)
	}
	r.Image, r.Command, r.Args, r.Env = ctr.Image, ctr.Command, ctr.Args, ctr.Env
	r.Resources = ctr.Resources
	r.Device, r.DeviceCount = device(ctr.Resources.Limits)
	return nil
}

// readNodeResources takes a node's resources from the replicated job named node, where there is
// one: an MPI runtime labels its launcher the trainer (readNodeContainer read that one's), and a
// node is what the job's node count multiplies; a launcher often asks for no accelerator at all.
func (r *Runtime) readNodeResources(jobs []any) error {
	for _, j := range jobs {
		job, ok := j.(map[string]any)
		if !ok || job["name"] != NodeJob {
			continue
		}
		ctrs, _, _ := unstructured.NestedSlice(job, "template", "spec", "template", "spec", "containers")
		for _, c := range ctrs {
			cm, ok := c.(map[string]any)
			if !ok || cm["name"] != NodeContainer {
				continue
			}
			var ctr corev1.Container
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(cm, &ctr); err != nil {
				return fmt.Errorf("reading the %q container of replicated job %s: %w", NodeContainer, NodeJob, err)
			}
			r.Resources = ctr.Resources
		}
	}
	return nil
}

func device(limits corev1.ResourceList) (string, string) {
	keys := make([]string, 0, len(limits))
	for k := range limits {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	for _, k := range keys {
		q := limits[corev1.ResourceName(k)]
		switch {
		case k == "nvidia.com/gpu":
			return "gpu", q.String()
		case k == "google.com/tpu":
			return "tpu", q.String()
		case strings.HasPrefix(k, "nvidia.com/mig-"):
			return strings.TrimPrefix(k, "nvidia.com/"), q.String()
		case k == "huawei.com/Ascend910":
			return "npu", q.String()
		}
	}
	if q, ok := limits[corev1.ResourceCPU]; ok {
		return "cpu", q.String()
	}
	return "Unknown", "Unknown"
}
