package argoharness

// Pods the workflow-controller creates run here with no kubelet: the harness's pod runner
// (test/internal/podrunner) runs a pod's containers as local processes, the way RunAgent runs the
// agent pod's, and writes the pod status a kubelet would write, so the controller marks the node
// from the pod as it does in a cluster. For pods of Argo's executor image, e.g. a resource
// template's pod: `argoexec init`, then `argoexec emissary -- argoexec resource <action>`
// (workflow/controller/workflowpod.go); argoexec is found on PATH in ARGO_ASSETS, and
// /var/run/argo (which argoexec hard-codes) is the pod's own emptyDir, so pods running at once do
// not share it.

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/trainstep/trainstep/test/internal/podrunner"
)

// Labels the workflow-controller puts on the pods it creates.
const (
	labelWorkflow  = "workflows.argoproj.io/workflow"
	labelComponent = "workflows.argoproj.io/component"
)

// PodRun is a pod whose containers run as local processes.
type PodRun = podrunner.PodRun

// PodRunner runs the pods of one workflow as the controller creates them.
type PodRunner = podrunner.Watch

// RunPod starts pod's containers as local processes (podrunner.Runner.RunPod).
func (h *Harness) RunPod(ctx context.Context, pod *corev1.Pod) (*PodRun, error) {
	return h.Pods.RunPod(ctx, pod)
}

// RunPods runs every pod of workflow wfName but its agent pod (RunAgent runs that) with RunPod as
// the controller creates it, until Stop. A deleted pod's containers get SIGTERM.
func (h *Harness) RunPods(ctx context.Context, wfName string) *PodRunner {
	return h.Pods.Watch(ctx, podrunner.Select{Namespace: Namespace, Labels: labels.SelectorFromSet(labels.Set{labelWorkflow: wfName}),
		Want: func(pod *corev1.Pod) bool { return !IsAgentPod(pod) }})
}

// IsAgentPod tells the agent pod of a workflow (RunAgent runs it) from the workflow's other pods.
func IsAgentPod(pod *corev1.Pod) bool { return pod.Labels[labelComponent] == "agent" }

// AgentPID is the process id of the agent's main container (`argoexec agent main`) of workflow
// wfName, once RunAgent started it; 0 before.
func (h *Harness) AgentPID(wfName string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pids["agent "+wfName]
}
