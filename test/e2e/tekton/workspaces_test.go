package tekton_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/test/internal/tektonharness"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// Workspace names Tekton accepts but that are not DNS labels (shared_data, sharedData) feed a
// trainstep task: the run completes, each workspace is a volume of the TrainJob's pods mounted
// at Tekton's /workspace/<name>. The PVC workspace goes through Tekton's affinity assistant (the
// default coschedule: workspaces): Tekton makes the assistant's StatefulSet and annotates the
// CustomRun, and the TrainJob's pods carry the affinity that puts them beside the assistant's pod,
// as Tekton's own TaskRun pods do.
func TestWorkspacesReachTheTrainJobPods(t *testing.T) {
	t.Parallel()
	dumpOnFailure(t)
	ns := env.Namespace(t)
	release := filepath.Join(t.TempDir(), "release")
	pipelineRun(t, ns, `
apiVersion: tekton.dev/v1
kind: PipelineRun
metadata: {name: ws}
spec:
  workspaces:
  - {name: shared_data, persistentVolumeClaim: {claimName: data}}
  - {name: sharedData, emptyDir: {}}
  pipelineSpec:
    workspaces: [{name: shared_data}, {name: sharedData}]
    tasks:
    - name: train
      taskRef: `+ref+`
      workspaces:
      - {name: shared_data, workspace: shared_data}
      - {name: sharedData, workspace: sharedData}
      params:
      - {name: framework, value: jax}
      - {name: trainer.numNodes, value: "2"}
      - {name: trainer.funcArgs.release, value: `+release+`}
      - name: trainer.func
        value: |
          def train(release):
              import os, time
              while not os.path.exists(release):
                  time.sleep(0.05)
`)
	// Tekton deletes its assistant when the PipelineRun finishes: the training (really run, by the
	// simulator) waits for the test to have seen it.
	// Tekton's name for the assistant of workspace shared_data in PipelineRun ws
	// (GetAffinityAssistantName, pkg/reconciler/pipelinerun/affinity_assistant.go).
	sum := sha256.Sum256([]byte("shared_data" + "ws"))
	assistant := "affinity-assistant-" + hex.EncodeToString(sum[:])[:10]
	sts := &appsv1.StatefulSet{}
	var tjs []trainer.TrainJob
	finished := "" // the CustomRun's end, if it ends before its training could
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		runs := tektonharness.CustomRuns(ct, t, c, ns)
		require.Len(ct, runs, 1)
		if cond := runs[0].Status.Succeeded(); cond != nil && cond.Status != corev1.ConditionUnknown {
			finished = cond.Reason + ": " + cond.Message
			return
		}
		require.NoError(ct, c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: assistant}, sts), "Tekton's affinity assistant")
		tjs = testenv.TrainJobs(t.Context(), ct, c, ns)
		require.Len(ct, tjs, 1)
	}, e2eTimeout, testenv.Interval)
	require.Empty(t, finished, "the CustomRun finished before its training")
	require.NoError(t, os.WriteFile(release, nil, 0o600))
	waitPR(t, ns, "ws", "True", "Succeeded")
	runs := tektonharness.CustomRuns(t, t, c, ns)
	require.Len(t, runs, 1)
	assert.Equal(t, assistant, runs[0].Annotations[tekton.AnnotationAffinityAssistant])

	node := nodePatch(t, &tjs[0])
	mounts := map[string]string{} // mount path → volume
	for _, m := range node.Containers[0].VolumeMounts {
		mounts[m.MountPath] = m.Name
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range node.Volumes {
		assert.Empty(t, validation.IsDNS1123Label(v.Name), "volume %q", v.Name)
		volumes[v.Name] = v
	}
	require.Contains(t, mounts, "/workspace/shared_data")
	require.Contains(t, mounts, "/workspace/sharedData")
	assert.NotEqual(t, mounts["/workspace/shared_data"], mounts["/workspace/sharedData"])
	claim := volumes[mounts["/workspace/shared_data"]].PersistentVolumeClaim
	require.NotNil(t, claim)
	assert.Equal(t, "data", claim.ClaimName)
	assert.NotNil(t, volumes[mounts["/workspace/sharedData"]].EmptyDir)

	// The pods' required pod affinity selects the assistant's pod (the StatefulSet's template
	// labels) on its node.
	require.NotNil(t, node.Affinity)
	require.NotNil(t, node.Affinity.PodAffinity)
	terms := node.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	require.Len(t, terms, 1)
	assert.Equal(t, "kubernetes.io/hostname", terms[0].TopologyKey)
	sel, err := metav1.LabelSelectorAsSelector(terms[0].LabelSelector)
	require.NoError(t, err)
	assert.True(t, sel.Matches(labels.Set(sts.Spec.Template.Labels)), "%s selects the assistant's pod %v", sel, sts.Spec.Template.Labels)
}

// nodePatch is the pod spec trainstep's runtime patch gives the TrainJob's node pods.
func nodePatch(t *testing.T, tj *trainer.TrainJob) *trainer.PodSpecPatch {
	t.Helper()
	for _, p := range tj.Spec.RuntimePatches {
		if p.Manager != trainjob.PatchManager || p.TrainingRuntimeSpec == nil || p.TrainingRuntimeSpec.Template == nil ||
			p.TrainingRuntimeSpec.Template.Spec == nil {
			continue
		}
		for _, j := range p.TrainingRuntimeSpec.Template.Spec.ReplicatedJobs {
			if j.Name == "node" && j.Template != nil && j.Template.Spec != nil && j.Template.Spec.Template != nil && j.Template.Spec.Template.Spec != nil {
				require.NotEmpty(t, j.Template.Spec.Template.Spec.Containers)
				return j.Template.Spec.Template.Spec
			}
		}
	}
	t.Fatalf("TrainJob %s has no runtime patch of the node pods: %+v", tj.Name, tj.Spec.RuntimePatches)
	return nil
}
