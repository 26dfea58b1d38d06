package cli_test

import (
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// A step run with --owner-pod (a container step of Argo or Tekton) that times out with
// keepOnTimeout keeps its TrainJob past the step pod: the binary marks it kept and drops the
// pod's owner reference, so the garbage collector, which takes what the pod still owns when the
// pod goes (Argo's podGC), leaves it.
func TestKeepOnTimeoutOutlivesTheStepPod(t *testing.T) {
	ns := env.Namespace(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train-step", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "trainstep:dev"}}}}
	require.NoError(t, env.Client.Create(t.Context(), pod))
	r := executor(t, onCluster(ns, writeStep(t, "framework: jax\nlabels: {sim-mode: hold}\ntimeout: 2s\nkeepOnTimeout: true\ntrainer: {func: \"def f(): pass\"}"),
		"--owner-pod", pod.Name, "--owner-pod-uid", string(pod.UID))...)
	assert.Equal(t, cli.ExitTimedOut, r.code, r.stderr)
	assert.Equal(t, "TimedOut", r.outputs["phase"])
	assert.Contains(t, r.outputs["message"], "kept (keepOnTimeout)")
	jobs := testenv.TrainJobs(t.Context(), t, env.Client, ns)
	require.Len(t, jobs, 1)
	kept := jobs[0]
	assert.True(t, trainjob.Kept(&kept), "annotations: %v", kept.Annotations)
	assert.Empty(t, kept.OwnerReferences, "a kept job has no owner to be collected with")

	// A job the pod still owns shows when the garbage collector has dealt with the pod's dependents.
	owned := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: kept.Name + "-owned", Labels: map[string]string{"sim-mode": "hold"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}}, Spec: kept.Spec}
	require.NoError(t, env.Client.Create(t.Context(), owned))
	require.NoError(t, env.Client.Delete(t.Context(), pod))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(env.Client.Get(t.Context(), client.ObjectKeyFromObject(owned), &trainer.TrainJob{}))
	}, testenv.Timeout, testenv.Interval, "the garbage collector must remove what the pod owns")
	tj := &trainer.TrainJob{}
	require.NoError(t, env.Client.Get(t.Context(), client.ObjectKeyFromObject(&kept), tj), "the kept TrainJob stays")
	assert.Nil(t, tj.DeletionTimestamp)
}
