package tekton

import (
	"encoding/json"
	"fmt"
	"path"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
)

// WorkspaceDir is where a workspace is mounted in the trainer container, as Tekton mounts a
// Task's workspaces: /workspace/<name> (plus the binding's subPath).
const WorkspaceDir = "/workspace"

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
// a PVC; and the run's serviceAccountName (Tekton's taskRunSpecs) the pods' ServiceAccount unless
// the step names one. An error names the workspace and the fix.
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
	for i, raw := range run.Spec.Workspaces {
		var ws workspaceBinding
		if err := json.Unmarshal(raw, &ws); err != nil {
			return fmt.Errorf("workspace %d is not a Tekton WorkspaceBinding: %w", i, err)
		}
		v := step.Volume{Name: ws.Name, PersistentVolumeClaim: ws.PersistentVolumeClaim, Secret: ws.Secret, ConfigMap: ws.ConfigMap, EmptyDir: ws.EmptyDir}
		switch {
		case len(ws.VolumeClaimTemplate) > 0:
			return fmt.Errorf("workspace %q: a volumeClaimTemplate binding cannot reach the TrainJob's pods; bind a persistentVolumeClaim (the preprocess step writes to it, the TrainJob mounts it)", ws.Name)
		case v.PersistentVolumeClaim == nil && v.Secret == nil && v.ConfigMap == nil && v.EmptyDir == nil:
			return fmt.Errorf("workspace %q: only persistentVolumeClaim, secret, configMap and emptyDir bindings can be mounted into the TrainJob's pods", ws.Name)
		}
		for _, existing := range pod.Volumes {
			if existing.Name == ws.Name {
				return fmt.Errorf("workspace %q: the step's pod.volumes already has a volume of that name; rename one", ws.Name)
			}
		}
		pod.Volumes = append(pod.Volumes, v)
		pod.VolumeMounts = append(pod.VolumeMounts, step.VolumeMount{Name: ws.Name, MountPath: path.Join(WorkspaceDir, ws.Name), SubPath: ws.SubPath,
			ReadOnly: ws.Secret != nil || ws.ConfigMap != nil})
	}
	return nil
}
