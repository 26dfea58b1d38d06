// Package step holds the one input schema every face of trainstep shares: a training step as a
// user writes it in YAML or JSON, parsed strictly and validated before anything touches a cluster.
package step

import (
	"bytes"
	"encoding/json"
	"reflect"
	"time"
)

// Spec is one training step. Names follow the Kubeflow SDK (numNodes, resourcesPerNode,
// packagesToInstall, pipIndexUrls, env) in Kubernetes camelCase.
type Spec struct {
	// APIVersion and Kind say what the file is, for editors and for a reader who meets it among
	// Kubernetes manifests. Both are optional (a step was a bare mapping before they existed);
	// when set they must be APIVersion and Kind.
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	// Framework picks the trainer (torch → TorchTrainer, …) and the runtimes discovery looks at.
	Framework string `json:"framework,omitempty"`
	// Runtime names a (Cluster)TrainingRuntime explicitly and skips discovery: its name alone, as
	// the SDK's TrainerClient.train(runtime=...) takes it, or {name, kind}.
	Runtime *RuntimeRef `json:"runtime,omitempty"`
	// Trainer carries the trainer kind and its own fields; the registered trainer decodes them.
	Trainer TrainerSpec `json:"trainer"`
	// RuntimeConfig is kept apart from training logic (KEP-285): a set field replaces the
	// trainer's field of the same name.
	RuntimeConfig *RuntimeConfig `json:"runtimeConfig,omitempty"`
	Initializer   *Initializer   `json:"initializer,omitempty"`
	// Pod is where the pods run and what they run with (placement, service account, volumes,
	// secrets); it reaches them through the installed Trainer's pod-template mechanism.
	Pod *Pod `json:"pod,omitempty"`
	// Checkpoint is where the step's checkpoints live, the same for every attempt, so a retry
	// resumes (checkpoint.go).
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
	// Cache serves a step the same as one that succeeded from that one's outputs, instead of
	// training again (cache.go).
	Cache *Cache `json:"cache,omitempty"`
	// Labels and Annotations go on the TrainJob's metadata (spec.labels was removed in Trainer v2.2).
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// NamePrefix replaces the readable part of the TrainJob's name, which is otherwise made from
	// the step key (an Argo node name, a CustomRun's name); the name stays deterministic:
	// <namePrefix>-<12 hex characters of the step's identity>.
	NamePrefix string `json:"namePrefix,omitempty"`
	// QueueName submits the TrainJob to a Kueue LocalQueue (label kueue.x-k8s.io/queue-name).
	QueueName string `json:"queueName,omitempty"`
	// Timeout bounds the whole step; when it passes the TrainJob is deleted unless KeepOnTimeout.
	Timeout       *Duration `json:"timeout,omitempty"`
	KeepOnTimeout bool      `json:"keepOnTimeout,omitempty"`
	// StartTimeout fails the step, with the scheduler's or kubelet's reason, when its TrainJob
	// has not started within it (counted like Timeout); the TrainJob is deleted. Started is an
	// initializer pod Running or Succeeded, or every trainer node at once (trainjob.Observation
	// Started); once started it never applies again. A job held by a queue (Suspended) is not
	// failing to start and is not bounded by it: it counts from the last resume (a queue's
	// admission) when that is later than the creation.
	StartTimeout *Duration `json:"startTimeout,omitempty"`
	// HangTimeout fails the step as hung when its TrainJob runs and the progress its function
	// reports (report(), through the Trainer's status server: v2.2+ with TrainJobStatus on) has
	// not moved for this long; the TrainJob is deleted. It counts from the last report, or from
	// the last resume (a queue's re-admission) when that is later; a job that never reported is
	// never hung.
	HangTimeout *Duration `json:"hangTimeout,omitempty"`
	// Retry runs the step again, as a new TrainJob that resumes from its checkpoint, when it
	// fails for a retryable cause (retry.go).
	Retry *Retry `json:"retry,omitempty"`
}

// APIVersion and Kind name a step file (and, in a Tekton taskRef, the custom task that runs one).
const (
	APIVersion = "trainstep.dev/v1alpha1"
	Kind       = "TrainStep"
)

// RuntimeRef names a runtime. Kind is ClusterTrainingRuntime or TrainingRuntime; empty means
// "a TrainingRuntime in the step's namespace if there is one, else the ClusterTrainingRuntime".
type RuntimeRef struct {
	Name string `json:"name"`
	Kind string `json:"kind,omitempty"`
}

var runtimeRefType = reflect.TypeOf(RuntimeRef{})

// UnmarshalJSON takes the name alone (runtime: torch-distributed) or the object, whose keys
// DecodeStrict has already checked (RuntimeRef is a shorthand struct). It has no MarshalJSON:
// both spellings write the same object, so they are the same step to every hash of it.
func (r *RuntimeRef) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) > 0 && b[0] == '"':
		return json.Unmarshal(b, &r.Name)
	case len(b) > 0 && b[0] == '{':
		type plain RuntimeRef // no UnmarshalJSON: no recursion
		return json.Unmarshal(b, (*plain)(r))
	}
	return &json.UnmarshalTypeError{Value: string(b), Type: runtimeRefType}
}

func (*RuntimeRef) shorthand() {}

// RuntimeConfig is KEP-285's RuntimeConfig: how the training environment is prepared, not what
// is trained. Nil fields leave the trainer's own values alone.
type RuntimeConfig struct {
	PackagesToInstall []string `json:"packagesToInstall,omitempty"`
	PipIndexUrls      []string `json:"pipIndexUrls,omitempty"`
	Env               Env      `json:"env,omitzero"`
}

// Initializer describes the dataset and model initializers of the runtime.
type Initializer struct {
	Dataset *StorageInitializer `json:"dataset,omitempty"`
	Model   *StorageInitializer `json:"model,omitempty"`
}

// StorageInitializer downloads a dataset or model before training starts.
type StorageInitializer struct {
	StorageURI string `json:"storageUri,omitempty"`
	Env        Env    `json:"env,omitzero"`
	// SecretRef names a Secret in the step's namespace whose keys become the initializer's env:
	// secretRef: name, or secretRef: {name: name} as in the TrainJob.
	SecretRef *SecretRef `json:"secretRef,omitempty"`
}

// TrainerSpec is the trainer block: its kind, and the raw fields that the registered trainer of
// that kind decodes strictly. Keeping them raw is what lets a new trainer bring its own fields
// without a change to this package.
type TrainerSpec struct {
	Kind   string
	Fields json.RawMessage
}

// UnmarshalJSON splits "kind" from the trainer's own fields.
func (t *TrainerSpec) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	if k, ok := m["kind"]; ok {
		if err := json.Unmarshal(k, &t.Kind); err != nil {
			return &json.UnmarshalTypeError{Value: "non-string", Type: stringType, Field: "trainer.kind"}
		}
		delete(m, "kind")
	}
	rest, err := json.Marshal(m)
	if err != nil {
		return err
	}
	t.Fields = rest
	return nil
}

// MarshalJSON writes the block back as one object.
func (t TrainerSpec) MarshalJSON() ([]byte, error) {
	m := map[string]json.RawMessage{}
	if len(t.Fields) > 0 {
		if err := json.Unmarshal(t.Fields, &m); err != nil {
			return nil, err
		}
	}
	if t.Kind != "" {
		k, _ := json.Marshal(t.Kind)
		m["kind"] = k
	}
	return json.Marshal(m)
}

// Duration is a time.Duration written as "90m" or "2h30m" (or a number of seconds).
type Duration struct{ time.Duration }

// UnmarshalJSON accepts a Go duration string or a plain number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return errBadDuration
		}
		d.Duration = v
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return errBadDuration
	}
	d.Duration = time.Duration(secs * float64(time.Second))
	return nil
}

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.Duration.String()) }
