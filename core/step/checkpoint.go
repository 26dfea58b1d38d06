package step

import (
	"crypto/sha256"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Checkpoint is where a step's checkpoints live, the same for every attempt and every node of
// it, so a retried step can resume: a sub-directory of a volume the pod block mounts, or an
// object-store URI that trainstep only passes through. Exactly one of Volume and URI is set.
type Checkpoint struct {
	// Volume names one of pod.volumes that pod.volumeMounts mounts into the trainer container.
	Volume string `json:"volume,omitempty"`
	// Path is the sub-directory of the volume's mountPath. Empty: one per logical step,
	// DefaultCheckpointPath/<owner UID>/<step key> (StepPath), which every attempt shares and a
	// new run of the pipeline does not.
	Path string `json:"path,omitempty"`
	// URI is an object-store location (s3://…, gs://…) the training code writes to itself.
	URI string `json:"uri,omitempty"`
}

// DefaultCheckpointPath is where, on the volume, the per-step directories of a block without
// checkpoint.path are.
const DefaultCheckpointPath = "checkpoints"

// The env a step's trainer container gets for its checkpoints. CheckpointDirEnv and
// CheckpointURIEnv say where they live (set from the checkpoint block on a cluster, and always
// set to a local directory by `executor run --local`); ResumeFromEnv is set by the command
// script to the newest complete checkpoint there, and unset when there is none.
const (
	CheckpointDirEnv = "TRAINSTEP_CHECKPOINT_DIR"
	CheckpointURIEnv = "TRAINSTEP_CHECKPOINT_URI"
	ResumeFromEnv    = "TRAINSTEP_RESUME_FROM"
	// AttemptEnv is the retry attempt (from 0) the step runs as, on every node of a step with a
	// checkpoint block (and always under --local).
	AttemptEnv = "TRAINSTEP_ATTEMPT"
)

// CheckpointEnvNames are the env names the checkpoint block sets, which the step's own env may
// not.
var CheckpointEnvNames = []string{CheckpointDirEnv, CheckpointURIEnv, AttemptEnv}

// Dir is the checkpoint directory inside the trainer container: the volume's mountPath joined
// with Path, or with DefaultCheckpointPath/stepPath (StepPath of the attempt's identity). It is
// empty for a URI, or when the volume is not mounted (Validate refuses that).
func (c *Checkpoint) Dir(pod *Pod, stepPath string) string {
	if c == nil || c.Volume == "" {
		return ""
	}
	m := checkpointMount(pod, c.Volume)
	if m == nil {
		return ""
	}
	p := c.Path
	if p == "" {
		p = path.Join(DefaultCheckpointPath, stepPath)
	}
	return path.Join(m.MountPath, p)
}

// Env is the checkpoint env of the trainer container of one attempt: the directory or the URI,
// and the attempt.
func (c *Checkpoint) Env(pod *Pod, stepPath string, attempt int) []corev1.EnvVar {
	var env []corev1.EnvVar
	switch {
	case c == nil:
		return nil
	case c.URI != "":
		env = append(env, corev1.EnvVar{Name: CheckpointURIEnv, Value: c.URI})
	case c.Dir(pod, stepPath) != "":
		env = append(env, corev1.EnvVar{Name: CheckpointDirEnv, Value: c.Dir(pod, stepPath)})
	}
	return append(env, corev1.EnvVar{Name: AttemptEnv, Value: fmt.Sprint(attempt)})
}

// StepPath is one logical step's directory, relative: <owner UID>/<step key>, the same for
// every attempt of the step (the owner is the pipeline run: the Workflow, the CustomRun, or
// --owner-uid; "local" when none), so an attempt resumes what the one before it saved, and a
// new run of the pipeline starts afresh. Each part is made one safe path element: an Argo node
// name holds brackets, dots and spaces.
func StepPath(ownerUID, stepKey string) string {
	if ownerUID == "" {
		ownerUID = "local"
	}
	if stepKey == "" {
		stepKey = "run"
	}
	return pathElement(ownerUID) + "/" + pathElement(stepKey)
}

var unsafePath = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// pathElement is s when it is a plain file name, else s with every other run of characters made
// "_" and a short hash of s, so two keys never share a directory.
func pathElement(s string) string {
	clean := unsafePath.ReplaceAllString(s, "_")
	if clean == s && len(s) <= 128 && strings.Trim(s, ".") != "" {
		return s
	}
	clean = strings.Trim(clean, "._")
	if len(clean) > 64 {
		clean = clean[:64]
	}
	sum := sha256.Sum256([]byte(s))
	return fmt.Sprintf("%s-%x", clean, sum[:4])
}

// checkpointMount is the first of pod.volumeMounts that mounts the volume named, or nil.
func checkpointMount(pod *Pod, volume string) *VolumeMount {
	if pod == nil {
		return nil
	}
	for i := range pod.VolumeMounts {
		if pod.VolumeMounts[i].Name == volume {
			return &pod.VolumeMounts[i]
		}
	}
	return nil
}

// Validate checks the block against the pod block whose volume it names.
func (c *Checkpoint) Validate(p *field.Path, pod *Pod) field.ErrorList {
	if c == nil {
		return nil
	}
	switch {
	case c.Volume != "" && c.URI != "":
		return field.ErrorList{field.Invalid(p, c.Volume+", "+c.URI,
			"set one of volume (a directory on a mounted volume) or uri (an object store), not both")}
	case c.URI != "":
		return c.validateURI(p)
	case c.Volume != "":
		return c.validateVolume(p, pod)
	}
	return field.ErrorList{field.Required(p, "volume: <a volume pod.volumeMounts mounts> (and path: <sub-directory>), or uri: s3://bucket/prefix")}
}

func (c *Checkpoint) validateURI(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Path != "" {
		errs = append(errs, field.Invalid(p.Child("path"), c.Path, "goes with volume; with uri, put the prefix in the URI (s3://bucket/prefix)"))
	}
	u, err := url.Parse(c.URI)
	if err != nil || u.Scheme == "" || u.Host == "" || !strings.Contains(c.URI, "://") {
		errs = append(errs, field.Invalid(p.Child("uri"), c.URI, "must be an object-store URI such as s3://bucket/prefix or gs://bucket/prefix; a directory on a volume goes in volume and path"))
	} else if u.Scheme == "file" {
		errs = append(errs, field.Invalid(p.Child("uri"), c.URI, "a local path does not outlive the pod; mount a volume and name it in checkpoint.volume"))
	}
	return errs
}

// readOnlySources are volume sources Kubernetes always mounts read-only: no place to write.
var readOnlySources = []string{"secret", "configMap", "projected", "downwardAPI", "image"}

func (c *Checkpoint) validateVolume(p *field.Path, pod *Pod) field.ErrorList {
	var errs field.ErrorList
	m := checkpointMount(pod, c.Volume)
	switch {
	case m == nil:
		errs = append(errs, field.Invalid(p.Child("volume"), c.Volume, unmountedMessage(pod)))
	case m.ReadOnly:
		errs = append(errs, field.Invalid(p.Child("volume"), c.Volume, fmt.Sprintf("is mounted readOnly at %s; checkpoints are written there, so drop readOnly from its pod.volumeMounts entry", m.MountPath)))
	default:
		for _, v := range pod.Volumes {
			if set := volumeSources(v.VolumeSource); v.Name == c.Volume && len(set) == 1 && contains(readOnlySources, set[0]) {
				errs = append(errs, field.Invalid(p.Child("volume"), c.Volume, fmt.Sprintf("is a %s volume, which Kubernetes mounts read-only; use a persistentVolumeClaim, nfs or csi volume", set[0])))
			}
		}
	}
	if c.Path != "" {
		clean := path.Clean(c.Path)
		switch {
		case path.IsAbs(c.Path):
			errs = append(errs, field.Invalid(p.Child("path"), c.Path, "must be relative to the volume's mountPath, such as checkpoints or runs/llama"))
		case clean == ".." || strings.HasPrefix(clean, "../") || strings.Contains("/"+c.Path+"/", "/../"):
			errs = append(errs, field.Invalid(p.Child("path"), c.Path, "must stay inside the volume: no .. in it, such as checkpoints or runs/llama"))
		}
	}
	return errs
}

// unmountedMessage names the volumes the trainer container mounts, which checkpoint.volume may name.
func unmountedMessage(pod *Pod) string {
	var mounted []string
	if pod != nil {
		for _, m := range pod.VolumeMounts {
			mounted = append(mounted, m.Name)
		}
	}
	if len(mounted) == 0 {
		return "is not mounted: the trainer container mounts no volume; add it to pod.volumes and mount it with pod.volumeMounts: [{name, mountPath}]"
	}
	return fmt.Sprintf("is not mounted by pod.volumeMounts (mounted: %s); name one of them, or mount this one", strings.Join(mounted, ", "))
}
