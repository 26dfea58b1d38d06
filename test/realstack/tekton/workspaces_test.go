package tekton_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/test/internal/tektonharness"
)

// A ReadWriteOnce PVC workspace (named shared_data, as Tekton allows) goes through Tekton's
// affinity assistant (the default coschedule: workspaces): the StatefulSet controller makes the
// assistant's pod, the scheduler puts it on a kwok Node, and every pod of the 2-node TrainJob is
// scheduled onto that same Node (where the claim is attached) and the step succeeds. Without the
// assistant's affinity the pods would spread over the Nodes, and on a real cluster wait for ever
// on a Multi-Attach error.
func TestAffinityAssistantPlacesTheTrainJobPods(t *testing.T) {
	dumpOnFailure(t)
	ns := stack.Namespace(t)
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	require.NoError(t, c.Create(t.Context(), claim))
	tektonharness.CreatePipelineRun(t, c, ns, `
apiVersion: tekton.dev/v1
kind: PipelineRun
metadata: {name: run}
spec:
  workspaces:
  - {name: shared_data, persistentVolumeClaim: {claimName: data}}
  pipelineSpec:
    workspaces: [{name: shared_data}]
    tasks:
    - name: train
      taskRef: `+tektonharness.Ref+`
      workspaces: [{name: shared_data}]
      params:
      - name: step
        value: |
          framework: torch
          trainer:
            numNodes: 2
            env: {KWOK_RUN_SECONDS: "2"}
            func: |
              def train():
                  print("training on /workspace/shared_data")
`)
	tektonharness.WaitPipelineRun(t, c, ns, "run", "True", "Succeeded", timeout)

	run := customRun(t, t, ns)
	assistant := run.Annotations[tekton.AnnotationAffinityAssistant]
	require.NotEmpty(t, assistant, "Tekton annotates the CustomRun with its affinity assistant")
	aa := &corev1.Pod{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: assistant + "-0"}, aa), "the assistant's pod (StatefulSet controller)")
	require.NotEmpty(t, aa.Spec.NodeName, "the assistant's pod is scheduled")

	pods := &corev1.PodList{}
	require.NoError(t, c.List(t.Context(), pods, client.InNamespace(ns), client.MatchingLabels{trainjob.LabelJobSetName: results(run)[trainjob.OutName]}))
	require.Len(t, pods.Items, 2)
	for _, p := range pods.Items {
		assert.Equal(t, aa.Spec.NodeName, p.Spec.NodeName, "pod %s is on the assistant's Node", p.Name)
		// Not by chance: the pod requires it, with the assistant's own labels.
		var terms []corev1.PodAffinityTerm
		if a := p.Spec.Affinity; a != nil && a.PodAffinity != nil {
			terms = a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		}
		if assert.Len(t, terms, 1, "pod %s", p.Name) {
			sel, err := metav1.LabelSelectorAsSelector(terms[0].LabelSelector)
			require.NoError(t, err)
			assert.True(t, sel.Matches(labels.Set(aa.Labels)), "pod %s: %s selects the assistant's pod", p.Name, sel)
			assert.Equal(t, corev1.LabelHostname, terms[0].TopologyKey)
		}
		var mounted string
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				mounted = v.PersistentVolumeClaim.ClaimName
			}
		}
		assert.Equal(t, "data", mounted, "pod %s mounts the workspace's claim", p.Name)
	}
}
