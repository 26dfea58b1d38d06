package realstack_test

import (
	"context"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainers"
	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/test/internal/realstack"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

const (
	dedicatedKey   = "trainstep.dev/test-dedicated"
	dedicatedValue = "pod-block"
)

// dedicate labels and taints one kwok Node for the test, and takes both off when it ends: only a
// pod that selects the label and tolerates the taint lands there.
func dedicate(t *testing.T, name string) {
	t.Helper()
	edit := func(f func(n *corev1.Node)) {
		n := &corev1.Node{}
		require.NoError(t, stack.Client.Get(context.Background(), client.ObjectKey{Name: name}, n))
		orig := n.DeepCopy()
		f(n)
		require.NoError(t, stack.Client.Patch(context.Background(), n, client.MergeFrom(orig)))
	}
	edit(func(n *corev1.Node) {
		n.Labels[dedicatedKey] = dedicatedValue
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: dedicatedKey, Value: dedicatedValue, Effect: corev1.TaintEffectNoSchedule})
	})
	t.Cleanup(func() {
		edit(func(n *corev1.Node) {
			delete(n.Labels, dedicatedKey)
			var keep []corev1.Taint
			for _, taint := range n.Spec.Taints {
				if taint.Key != dedicatedKey {
					keep = append(keep, taint)
				}
			}
			n.Spec.Taints = keep
		})
	})
}

// boundClaim makes a PersistentVolumeClaim and a PersistentVolume reserved for it, and waits
// until the stack's PV controller has bound them, so the scheduler places a pod that mounts it.
func boundClaim(t *testing.T, ns, name string) {
	t.Helper()
	ctx := t.Context()
	size := resource.MustParse("1Gi")
	noClass := ""
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + name}},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              noClass,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: ns, Name: name, APIVersion: "v1"},
		},
	}
	require.NoError(t, stack.Client.Create(ctx, pv))
	t.Cleanup(func() { _ = stack.Client.Delete(context.Background(), pv) })
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
			VolumeName:       pv.Name,
			StorageClassName: &noClass,
		},
	}
	require.NoError(t, stack.Client.Create(ctx, pvc))
	require.Eventually(t, func() bool {
		return stack.Client.Get(ctx, client.ObjectKeyFromObject(pvc), pvc) == nil && pvc.Status.Phase == corev1.ClaimBound
	}, timeout, interval, "the PV controller must bind claim %s to %s", name, pv.Name)
}

// podBlockStep sets every pod field a step can: placement, ServiceAccount, a PVC-backed volume
// mounted in the trainer container, a Secret key as env and a Secret as envFrom.
const podBlockStep = `
framework: torch
trainer:
  numNodes: 2
  env: {KWOK_RUN_SECONDS: "1"}
  func: |
    def train():
        pass
pod:
  nodeSelector: {` + dedicatedKey + `: ` + dedicatedValue + `}
  tolerations: [{key: ` + dedicatedKey + `, operator: Equal, value: ` + dedicatedValue + `, effect: NoSchedule}]
  serviceAccountName: trainer
  volumes: [{name: data, persistentVolumeClaim: {claimName: datasets}}]
  volumeMounts: [{name: data, mountPath: /data, readOnly: true}]
  env: {HF_TOKEN: {secretKeyRef: {name: hf, key: token, optional: true}}}
  envFrom: [{secretRef: {name: s3-credentials, optional: true}, prefix: AWS_}]
timeout: 3m
`

// The pod block reaches the pods the real Trainer makes (through spec.runtimePatches on v2.2+,
// spec.podTemplateOverrides on v2.1, read from the installed CRD; v2.0 has neither, and the
// step is refused by name): they select and tolerate a dedicated kwok Node and are scheduled there,
// run as the named ServiceAccount, mount the PVC-backed volume in the trainer container, and get
// the Secret key as env.
func TestPodBlockReachesThePodsTheTrainerMakes(t *testing.T) {
	ns := stack.Namespace(t)
	node := stack.Nodes[len(stack.Nodes)-1]
	dedicate(t, node)
	boundClaim(t, ns, "datasets")
	require.NoError(t, stack.Client.Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: ns}}))

	r := executor(t, ns, podBlockStep)
	if installedAPI(t).PodMechanism == "" {
		realstack.Lacks(t, "Trainer %s has neither spec.runtimePatches (v2.2+) nor spec.podTemplateOverrides (v2.1): trainstep refuses the pod block by name at plan time (exit 2, %q)", trainerRelease(t), "pod: Forbidden")
		refusedAtPlan(t, ns, r, "pod: Forbidden", "upgrade the Trainer, or set these in the runtime's pod template")
		return
	}
	for _, p := range podsOfSucceededStep(t, ns, r, 2) {
		assert.Equal(t, node, p.Spec.NodeName, "pod %s is placed on the dedicated Node", p.Name)
		assert.Equal(t, dedicatedValue, p.Spec.NodeSelector[dedicatedKey], "pod %s", p.Name)
		assert.Contains(t, p.Spec.Tolerations, corev1.Toleration{Key: dedicatedKey, Operator: corev1.TolerationOpEqual, Value: dedicatedValue, Effect: corev1.TaintEffectNoSchedule})
		assert.Equal(t, "trainer", p.Spec.ServiceAccountName)
		var claim string
		for _, v := range p.Spec.Volumes {
			if v.Name == "data" && v.PersistentVolumeClaim != nil {
				claim = v.PersistentVolumeClaim.ClaimName
			}
		}
		assert.Equal(t, "datasets", claim, "pod %s has the PVC-backed volume", p.Name)
		var node corev1.Container
		for _, c := range p.Spec.Containers {
			if c.Name == "node" {
				node = c
			}
		}
		assert.Contains(t, node.VolumeMounts, corev1.VolumeMount{Name: "data", MountPath: "/data", ReadOnly: true})
		// envFrom: the Secret mounted where the command script reads it.
		assert.Contains(t, node.VolumeMounts, corev1.VolumeMount{Name: "trainstep-env-from-0", MountPath: "/var/run/trainstep/env-from/0", ReadOnly: true})
		var envFromSecret string
		for _, v := range p.Spec.Volumes {
			if v.Name == "trainstep-env-from-0" && v.Secret != nil {
				envFromSecret = v.Secret.SecretName
			}
		}
		assert.Equal(t, "s3-credentials", envFromSecret)
		require.NotEmpty(t, node.Command)
		assert.Contains(t, node.Command[len(node.Command)-1], "/var/run/trainstep/env-from}/0")
		var token *corev1.EnvVar
		for i := range node.Env {
			if node.Env[i].Name == "HF_TOKEN" {
				token = &node.Env[i]
			}
		}
		require.NotNil(t, token, "pod %s has the secret env", p.Name)
		assert.Equal(t, "hf", token.ValueFrom.SecretKeyRef.Name)
		assert.Equal(t, corev1.PodSucceeded, p.Status.Phase)
	}
}

// The step's grace period reaches every pod the real Trainer makes (spec.runtimePatches'
// terminationGracePeriodSeconds, Trainer v2.3+): the time on_sigterm's last save has when a pod
// is preempted or evicted. An older Trainer's CRD has no such field, and the step is refused by
// name with nothing created.
func TestGracePeriodReachesThePodsTheTrainerMakes(t *testing.T) {
	ns := stack.Namespace(t)
	r := executor(t, ns, `
framework: torch
trainer:
  numNodes: 2
  env: {KWOK_RUN_SECONDS: "1"}
  func: |
    def train():
        pass
pod: {terminationGracePeriodSeconds: 120}
timeout: 3m
`)
	if api := installedAPI(t); !api.GracePeriod {
		realstack.Lacks(t, "Trainer %s takes no terminationGracePeriodSeconds in a TrainJob (v2.3+ does): trainstep refuses it by name at plan time", trainerRelease(t))
		refusedAtPlan(t, ns, r, "pod.terminationGracePeriodSeconds: Forbidden")
		return
	}
	for _, p := range podsOfSucceededStep(t, ns, r, 2) {
		assert.Equal(t, ptr.To[int64](120), p.Spec.TerminationGracePeriodSeconds, "pod %s", p.Name)
	}
}

// With no face left to enforce it (nothing waits here), the step's timeout still stops the job:
// on Trainer v2.2+ it is spec.activeDeadlineSeconds, and the real Trainer fails the TrainJob with
// DeadlineExceeded. Before v2.2 only trainstep's wait enforces it.
func TestTheTrainerEnforcesTheStepsTimeout(t *testing.T) {
	ns := stack.Namespace(t)
	const long = "framework: torch\ntimeout: 3s\ntrainer: {env: {KWOK_RUN_SECONDS: \"120\"}, func: \"def train():\\n    pass\\n\"}"
	if api := installedAPI(t); !api.ActiveDeadline {
		// Nothing but trainstep can stop the job at the timeout: its wait does, and deletes it.
		realstack.Lacks(t, "Trainer %s has no spec.activeDeadlineSeconds (v2.2+): the step's timeout is enforced by trainstep's wait, which deletes the TrainJob (exit 3)", trainerRelease(t))
		r := executor(t, ns, long)
		assert.Equal(t, cli.ExitTimedOut, r.Code, "stderr:\n%s", r.Stderr)
		assert.Equal(t, "TimedOut", r.Outputs["phase"])
		require.Eventually(t, func() bool { return len(testenv.TrainJobs(t.Context(), t, stack.Client, ns)) == 0 },
			timeout, interval, "the TrainJob must be deleted at the timeout")
		return
	}
	s, err := step.Parse([]byte(long))
	require.NoError(t, err)
	planner := &trainjob.Planner{Trainers: trainers.Builtin(), Runtimes: runtimes.ClusterSource{Reader: stack.Client}, Detector: &trainjob.APIDetector{Reader: stack.Client}}
	p, err := planner.Plan(t.Context(), s, ns)
	require.NoError(t, err)
	require.True(t, p.API.ActiveDeadline, p.API.Source)
	id := trainjob.Identity{Engine: "test", OwnerUID: ns, StepKey: "deadline"}
	obj, err := p.Object(id)
	require.NoError(t, err)
	_, _, err = trainjob.Submit(t.Context(), stack.Client, obj, id)
	require.NoError(t, err)
	var cond *metav1.Condition
	require.Eventually(t, func() bool {
		tj := &trainer.TrainJob{}
		if stack.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: id.Name()}, tj) != nil {
			return false
		}
		cond = apimeta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobFailed)
		return cond != nil && cond.Status == metav1.ConditionTrue
	}, timeout, interval, "the Trainer did not fail the job at its deadline")
	assert.Equal(t, "DeadlineExceeded", cond.Reason, cond.Message)
}
