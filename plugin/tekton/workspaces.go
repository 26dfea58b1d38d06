package tekton

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
)

// WorkspaceDir is where a workspace is mounted in the trainer container, as Tekton mounts a
// Task's workspaces: /workspace/<name> (plus the binding's subPath).
const WorkspaceDir = "/workspace"

// Tekton's affinity assistant (pkg/workspace/affinity_assistant_names.go, v1.3.0): the
// PipelineRun controller puts AnnotationAffinityAssistant on every CustomRun whose workspaces
// share a PersistentVolumeClaim through an assistant (coschedule: workspaces, the default) or on
// every CustomRun of the PipelineRun (coschedule: pipelineruns); the assistant is a StatefulSet
// whose pod carries the two labels below, and a TaskRun's pod is pinned to that pod's node by a
// required pod-affinity term on the hostname (pkg/internal/affinityassistant/transformer.go).
const (
	AnnotationAffinityAssistant = "pipeline.tekton.dev/affinity-assistant"
	labelAssistantInstance      = "app.kubernetes.io/instance"
	labelAssistantComponent     = "app.kubernetes.io/component"
	assistantComponent          = "affinity-assistant"
	hostnameTopology            = "kubernetes.io/hostname"
)

// workspaceBinding is the part of Tekton's WorkspaceBinding trainstep reads.
type workspaceBinding struct {
	Name                  string                                    `json:"name"`
	SubPath               string                                    `json:"subPath,omitempty"`
	PersistentVolumeClaim *corev1.PersistentVolumeClaimVolumeSource `json:"persistentVolumeClaim,omitempty"`
	Secret                *corev1.SecretVolumeSource                `json:"secret,omitempty"`
	ConfigMap             *corev1.ConfigMapVolumeSource             `json:"configMap,omitempty"`
	EmptyDir              *corev1.EmptyDirVolumeSource              `json:"emptyDir,omitempty"`
	VolumeClaimTemplate   json.RawMessage                           `json:"volumeClaimTemplate,omitempty"`
}

// podFromRun makes the run's workspaces volumes of the TrainJob's pods, mounted in the trainer
// container at /workspace/<name>, so a step before the training (preprocess) can hand it data on
// a PVC; pins the pods to Tekton's affinity assistant when a PVC is shared through one; and makes
// the run's serviceAccountName (Tekton's taskRunSpecs) the pods' ServiceAccount unless the step
// names one. An error names the workspace and the fix.
func podFromRun(run *v1beta1.CustomRun, spec *step.Spec) error {
	if len(run.Spec.Workspaces) == 0 && run.Spec.ServiceAccountName == "" {
		return nil
	}
	if spec.Pod == nil {
		spec.Pod = &step.Pod{}
	}
	pod := spec.Pod
	if pod.ServiceAccountName == "" && run.Spec.ServiceAccountName != "" && run.Spec.ServiceAccountName != "default" {
		pod.ServiceAccountName = run.Spec.ServiceAccountName
	}
	claims := false
	for i, raw := range run.Spec.Workspaces {
		var ws workspaceBinding
		if err := json.Unmarshal(raw, &ws); err != nil {
			return fmt.Errorf("workspace %d is not a Tekton WorkspaceBinding: %w", i, err)
		}
		name := volumeName(ws.Name)
		v := step.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: ws.PersistentVolumeClaim, Secret: ws.Secret, ConfigMap: ws.ConfigMap, EmptyDir: ws.EmptyDir}}
		switch {
		case len(ws.VolumeClaimTemplate) > 0:
			return fmt.Errorf("workspace %q: a volumeClaimTemplate binding cannot reach the TrainJob's pods; bind a persistentVolumeClaim (the preprocess step writes to it, the TrainJob mounts it)", ws.Name)
		case v.PersistentVolumeClaim == nil && v.Secret == nil && v.ConfigMap == nil && v.EmptyDir == nil:
			return fmt.Errorf("workspace %q: only persistentVolumeClaim, secret, configMap and emptyDir bindings can be mounted into the TrainJob's pods", ws.Name)
		}
		for _, existing := range pod.Volumes {
			if existing.Name == name {
				return fmt.Errorf("workspace %q: its volume is named %q, and the step's pod.volumes already has a volume of that name; rename the step's volume", ws.Name, name)
			}
		}
		claims = claims || v.PersistentVolumeClaim != nil
		pod.Volumes = append(pod.Volumes, v)
		pod.VolumeMounts = append(pod.VolumeMounts, step.VolumeMount{Name: name, MountPath: path.Join(WorkspaceDir, ws.Name), SubPath: ws.SubPath,
			ReadOnly: ws.Secret != nil || ws.ConfigMap != nil})
	}
	if aa := run.Annotations[AnnotationAffinityAssistant]; aa != "" && claims {
		pinToAssistant(pod, aa)
	}
	return nil
}

// nonLabel is what a DNS label cannot hold; each run of it becomes one dash.
var nonLabel = regexp.MustCompile(`[^a-z0-9]+`)

// volumeName is the pod volume of a workspace. Tekton accepts any non-empty, unique workspace
// name (sharedData, shared_data, …) and names the volumes itself; a pod volume's name must be a
// DNS label. A name that is one, and not trainstep's reserved prefix, is kept (readable in the
// pod); any other becomes a DNS label of its own: "ws-", its lowercased letters and digits, and a
// hash of the whole name, so two workspaces never share a volume and the name is the same on
// every reconcile and every controller.
func volumeName(workspace string) string {
	if len(validation.IsDNS1123Label(workspace)) == 0 && !strings.HasPrefix(workspace, step.ReservedVolumePrefix) {
		return workspace
	}
	sum := sha256.Sum256([]byte(workspace))
	hash := hex.EncodeToString(sum[:])[:10]
	base := strings.Trim(nonLabel.ReplaceAllString(strings.ToLower(workspace), "-"), "-")
	const room = validation.DNS1123LabelMaxLength - len("ws-") - len("-") - 10
	if len(base) > room {
		base = strings.TrimRight(base[:room], "-")
	}
	if base == "" {
		return "ws-" + hash
	}
	return "ws-" + base + "-" + hash
}

// pinToAssistant adds to the pods the pod-affinity term Tekton gives a TaskRun's pod for the same
// assistant: every pod of the TrainJob on the node of the assistant's pod, where the workspace's
// PersistentVolumeClaim is attached. Without it a ReadWriteOnce claim already attached to that
// node keeps the TrainJob's pods elsewhere in ContainerCreating (Multi-Attach) for ever. Every
// node of a multi-node step lands on that one node too: that is what sharing one attached volume
// means (see the README's Limits).
func pinToAssistant(pod *step.Pod, assistant string) {
	if pod.Affinity == nil {
		pod.Affinity = &corev1.Affinity{}
	}
	if pod.Affinity.PodAffinity == nil {
		pod.Affinity.PodAffinity = &corev1.PodAffinity{}
	}
	pa := pod.Affinity.PodAffinity
	pa.RequiredDuringSchedulingIgnoredDuringExecution = append(pa.RequiredDuringSchedulingIgnoredDuringExecution, corev1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
			labelAssistantInstance:  assistant,
			labelAssistantComponent: assistantComponent,
		}},
		TopologyKey: hostnameTopology,
	})
}
