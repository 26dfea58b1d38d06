package trainjob

import (
	"slices"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/step"
)

// PatchManager is trainstep's key in spec.runtimePatches (a list map keyed by manager, so Kueue's
// and the SDK's entries stay theirs).
const PatchManager = "trainstep.dev/trainstep"

// podTarget is one replicated job of the runtime and what the step changes in its pods.
type podTarget struct {
	job   string
	mount bool // the trainer container "node" gets pod.volumeMounts
}

// podTargets: every replicated job gets the pod-level fields; the ones that run the trainer
// container (node, and launcher on MPI runtimes; not the initializers) get the mounts.
func podTargets(rt *runtimes.Runtime, pod *step.Pod) []podTarget {
	var out []podTarget
	for _, rj := range rt.ReplicatedJobs {
		init := rj.Ancestor == runtimes.AncestorDataset || rj.Ancestor == runtimes.AncestorModel
		mounts := pod != nil && (len(pod.VolumeMounts) > 0 || len(pod.EnvFrom) > 0)
		out = append(out, podTarget{job: rj.Name, mount: !init && mounts && slices.Contains(rj.Containers, NodeContainer)})
	}
	return out
}

func hasPodFields(pod *step.Pod) bool {
	return pod != nil && (len(pod.NodeSelector) > 0 || len(pod.Tolerations) > 0 || pod.Affinity != nil ||
		len(pod.SchedulingGates) > 0 || pod.ServiceAccountName != "" || len(pod.ImagePullSecrets) > 0 ||
		len(pod.Volumes) > 0 || len(pod.VolumeMounts) > 0 || len(pod.EnvFrom) > 0 || pod.TerminationGracePeriodSeconds != nil)
}

func gates(names []string) []corev1.PodSchedulingGate {
	var out []corev1.PodSchedulingGate
	for _, n := range names {
		out = append(out, corev1.PodSchedulingGate{Name: n})
	}
	return out
}

func refs(names []string) []corev1.LocalObjectReference {
	var out []corev1.LocalObjectReference
	for _, n := range names {
		out = append(out, corev1.LocalObjectReference{Name: n})
	}
	return out
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return ptr.To(s)
}

// PodLabels are the identity labels trainstep puts on every pod of its TrainJobs, through the
// pod template of each replicated job (spec.runtimePatches on Trainer v2.2+, podTemplateOverrides
// on v2.1). The Trainer copies none of the TrainJob's own labels to its pods, which carry only
// JobSet's; with these a face's pod cache holds its own pods (one workflow's, one engine's), not
// every JobSet pod of the namespace or cluster.
func PodLabels(id Identity) map[string]string {
	l := id.Labels()
	return map[string]string{LabelManagedBy: ManagedByValue, LabelEngine: l[LabelEngine], LabelOwnerUID: l[LabelOwnerUID]}
}

// podMeta is the pod template metadata patch: labels only (the webhook allows labels and
// annotations).
func podMeta(labels map[string]string) *metav1.ObjectMeta {
	if len(labels) == 0 {
		return nil
	}
	return &metav1.ObjectMeta{Labels: labels}
}

// runtimePatch renders the pod block and the pod labels as trainstep's spec.runtimePatches entry
// (Trainer v2.2+).
func runtimePatch(rt *runtimes.Runtime, pod *step.Pod, labels map[string]string) []trainer.RuntimePatch {
	fields := hasPodFields(pod)
	if !fields && len(labels) == 0 {
		return nil
	}
	var jobs []trainer.ReplicatedJobPatch
	for _, t := range podTargets(rt, pod) {
		tmpl := &trainer.PodTemplatePatch{Metadata: podMeta(labels)}
		jobs = append(jobs, trainer.ReplicatedJobPatch{Name: t.job, Template: &trainer.JobTemplatePatch{
			Spec: &trainer.JobSpecPatch{Template: tmpl}}})
		if !fields {
			continue
		}
		spec := &trainer.PodSpecPatch{
			ServiceAccountName: optString(pod.ServiceAccountName),
			Volumes:            pod.CoreVolumes(),
			ImagePullSecrets:   refs(pod.ImagePullSecrets),
			NodeSelector:       pod.NodeSelector,
			Affinity:           pod.Affinity,
			Tolerations:        pod.Tolerations,
			SchedulingGates:    gates(pod.SchedulingGates),
			// Every replicated job's pods: a stopped initializer gets the same time as a node.
			TerminationGracePeriodSeconds: pod.TerminationGracePeriodSeconds,
		}
		if t.mount {
			spec.Containers = []trainer.ContainerPatch{{Name: NodeContainer, VolumeMounts: pod.CoreVolumeMounts()}}
		}
		tmpl.Spec = spec
	}
	if len(jobs) == 0 {
		return nil
	}
	return []trainer.RuntimePatch{{
		Manager: PatchManager,
		TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
			Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: jobs}}},
	}}
}

// PodTemplateOverride is Trainer v2.1's spec.podTemplateOverrides item. trainstep builds against
// the v2.3 API package, which no longer has it, so it is declared here with v2.1's JSON names.
type PodTemplateOverride struct {
	TargetJobs []PodTemplateOverrideTargetJob `json:"targetJobs"`
	Metadata   *metav1.ObjectMeta             `json:"metadata,omitempty"`
	Spec       *PodTemplateSpecOverride       `json:"spec,omitempty"`
}

// PodTemplateOverrideTargetJob names a replicated job.
type PodTemplateOverrideTargetJob struct {
	Name string `json:"name"`
}

// PodTemplateSpecOverride is v2.1's override of a pod spec.
type PodTemplateSpecOverride struct {
	ServiceAccountName *string                       `json:"serviceAccountName,omitempty"`
	NodeSelector       map[string]string             `json:"nodeSelector,omitempty"`
	Affinity           *corev1.Affinity              `json:"affinity,omitempty"`
	Tolerations        []corev1.Toleration           `json:"tolerations,omitempty"`
	Volumes            []corev1.Volume               `json:"volumes,omitempty"`
	Containers         []ContainerOverride           `json:"containers,omitempty"`
	SchedulingGates    []corev1.PodSchedulingGate    `json:"schedulingGates,omitempty"`
	ImagePullSecrets   []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
}

// ContainerOverride is v2.1's override of one container.
type ContainerOverride struct {
	Name         string               `json:"name"`
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts,omitempty"`
}

// podTemplateOverrides renders the pod block and the pod labels for Trainer v2.1: one override
// per replicated job.
func podTemplateOverrides(rt *runtimes.Runtime, pod *step.Pod, labels map[string]string) []PodTemplateOverride {
	fields := hasPodFields(pod)
	if !fields && len(labels) == 0 {
		return nil
	}
	var out []PodTemplateOverride
	for _, t := range podTargets(rt, pod) {
		o := PodTemplateOverride{TargetJobs: []PodTemplateOverrideTargetJob{{Name: t.job}}, Metadata: podMeta(labels)}
		if !fields {
			out = append(out, o)
			continue
		}
		spec := &PodTemplateSpecOverride{
			ServiceAccountName: optString(pod.ServiceAccountName),
			NodeSelector:       pod.NodeSelector,
			Affinity:           pod.Affinity,
			Tolerations:        pod.Tolerations,
			Volumes:            pod.CoreVolumes(),
			SchedulingGates:    gates(pod.SchedulingGates),
			ImagePullSecrets:   refs(pod.ImagePullSecrets),
		}
		if t.mount {
			spec.Containers = []ContainerOverride{{Name: NodeContainer, VolumeMounts: pod.CoreVolumeMounts()}}
		}
		o.Spec = spec
		out = append(out, o)
	}
	return out
}
