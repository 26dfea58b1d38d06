package trainjob

import (
	"fmt"
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/trainstep/trainstep/core/runtimes/stock"
	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainers"
)

const podStep = `framework: %s
trainer: {func: "def train():\n    pass\n"}
pod:
  nodeSelector: {pool: gpu}
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  serviceAccountName: trainer
  imagePullSecrets: [regcred]
  schedulingGates: [example.com/quota]
  volumes: [{name: data, persistentVolumeClaim: {claimName: datasets}}]
  volumeMounts: [{name: data, mountPath: /data}]
  env: {HF_TOKEN: {secretKeyRef: {name: hf, key: token}}}
  envFrom: [{secretRef: {name: s3}, prefix: AWS_}]
`

func planFor(t *testing.T, framework string, api *API) *Plan {
	t.Helper()
	s, err := step.Parse([]byte(fmt.Sprintf(podStep, framework)))
	require.NoError(t, err)
	p, err := (&Planner{Trainers: trainers.Builtin(), Runtimes: stock.Source{}, API: api}).Plan(t.Context(), s, "team")
	require.NoError(t, err)
	return p
}

func TestPodBlockBecomesRuntimePatches(t *testing.T) {
	p := planFor(t, "deepspeed", nil)
	assert.Equal(t, AssumedAPI, p.API, "no cluster: Trainer v2.3 is assumed")
	obj, err := p.Object(Identity{Engine: "test", OwnerUID: "u", StepKey: "k"})
	require.NoError(t, err)
	tj := obj.(*trainer.TrainJob)
	require.Len(t, tj.Spec.RuntimePatches, 1)
	rp := tj.Spec.RuntimePatches[0]
	assert.Equal(t, PatchManager, rp.Manager)
	jobs := rp.TrainingRuntimeSpec.Template.Spec.ReplicatedJobs
	names := []string{}
	for _, j := range jobs {
		names = append(names, j.Name)
		ps := j.Template.Spec.Template.Spec
		assert.Equal(t, map[string]string{"pool": "gpu"}, ps.NodeSelector)
		assert.Equal(t, "trainer", *ps.ServiceAccountName)
		assert.Equal(t, "regcred", ps.ImagePullSecrets[0].Name)
		assert.Equal(t, "example.com/quota", ps.SchedulingGates[0].Name)
		assert.Equal(t, "datasets", ps.Volumes[0].PersistentVolumeClaim.ClaimName)
		require.Len(t, ps.Containers, 1, "the trainer container of %s gets the mounts", j.Name)
		assert.Equal(t, "node", ps.Containers[0].Name)
		assert.Equal(t, "/data", ps.Containers[0].VolumeMounts[0].MountPath)
		assert.Empty(t, ps.Containers[0].Env, "the Trainer refuses env patches on the node container")
		assert.Equal(t, "s3", ps.Volumes[1].Secret.SecretName, "envFrom's object, mounted")
		assert.Equal(t, "/var/run/trainstep/env-from/0", ps.Containers[0].VolumeMounts[1].MountPath)
	}
	assert.ElementsMatch(t, []string{"node", "launcher"}, names, "MPI runtimes: the launcher runs the trainer container too")
	script := tj.Spec.Trainer.Command[len(tj.Spec.Trainer.Command)-1]
	assert.Contains(t, script, `"${TRAINSTEP_ENV_FROM_DIR:-/var/run/trainstep/env-from}/0"/*`, "the script exports the mounted keys")
	assert.Contains(t, script, `__ts_n=AWS_"${__ts_f##*/}"`)
	last := tj.Spec.Trainer.Env[len(tj.Spec.Trainer.Env)-1]
	assert.Equal(t, "HF_TOKEN", last.Name)
	assert.Equal(t, "hf", last.ValueFrom.SecretKeyRef.Name, "secret env goes through spec.trainer.env valueFrom")
}

func TestPodBlockBecomesPodTemplateOverridesOnV21(t *testing.T) {
	v21 := API{PodMechanism: PodTemplateOverrides, MaxCommandItem: CommandItemV22, Source: "test v2.1"}
	p := planFor(t, "torch", &v21)
	obj, err := p.Object(Identity{Engine: "test", OwnerUID: "u", StepKey: "k"})
	require.NoError(t, err)
	u := obj.(*unstructured.Unstructured)
	_, has, _ := unstructured.NestedSlice(u.Object, "spec", "runtimePatches")
	assert.False(t, has, "v2.1 has no runtimePatches")
	ov, has, _ := unstructured.NestedSlice(u.Object, "spec", "podTemplateOverrides")
	require.True(t, has)
	require.Len(t, ov, 1, "torch-distributed has one replicated job")
	o := ov[0].(map[string]any)
	target, _, _ := unstructured.NestedSlice(o, "targetJobs")
	assert.Equal(t, "node", target[0].(map[string]any)["name"])
	sel, _, _ := unstructured.NestedStringMap(o, "spec", "nodeSelector")
	assert.Equal(t, map[string]string{"pool": "gpu"}, sel)
	ctrs, _, _ := unstructured.NestedSlice(o, "spec", "containers")
	assert.Equal(t, "node", ctrs[0].(map[string]any)["name"])
	assert.Equal(t, "TrainJob", u.GetKind())
}

func TestPodBlockOnATrainerWithoutAMechanismIsAFieldError(t *testing.T) {
	s, err := step.Parse([]byte(fmt.Sprintf(podStep, "torch")))
	require.NoError(t, err)
	v20 := API{MaxCommandItem: CommandItemV22, Source: "test v2.0"}
	_, err = (&Planner{Trainers: trainers.Builtin(), Runtimes: stock.Source{}, API: &v20}).Plan(t.Context(), s, "team")
	require.Error(t, err)
	assert.True(t, step.IsInvalid(err))
	assert.Contains(t, err.Error(), "pod: Forbidden")
}

// A grace period goes into every replicated job's pod spec where the Trainer takes it (v2.3+),
// and is refused by name where it does not.
func TestGracePeriodFollowsTheInstalledTrainer(t *testing.T) {
	s, err := step.Parse([]byte("framework: torch\ntrainer: {func: \"def f():\\n    pass\\n\"}\npod: {terminationGracePeriodSeconds: 120}"))
	require.NoError(t, err)
	p, err := (&Planner{Trainers: trainers.Builtin(), Runtimes: stock.Source{}, API: &AssumedAPI}).Plan(t.Context(), s, "team")
	require.NoError(t, err)
	tj := p.TrainJob(Identity{Engine: "cli", OwnerUID: "u", StepKey: "k"})
	require.Len(t, tj.Spec.RuntimePatches, 1)
	jobs := tj.Spec.RuntimePatches[0].TrainingRuntimeSpec.Template.Spec.ReplicatedJobs
	require.NotEmpty(t, jobs)
	for _, j := range jobs {
		assert.Equal(t, ptr.To[int64](120), j.Template.Spec.Template.Spec.TerminationGracePeriodSeconds, j.Name)
	}
	for _, api := range []API{
		{PodMechanism: PodRuntimePatches, ActiveDeadline: true, MaxCommandItem: CommandItemV22, Source: "test v2.2"},
		{PodMechanism: PodTemplateOverrides, MaxCommandItem: CommandItemV22, Source: "test v2.1"},
	} {
		_, err = (&Planner{Trainers: trainers.Builtin(), Runtimes: stock.Source{}, API: &api}).Plan(t.Context(), s, "team")
		require.Error(t, err, api.Source)
		assert.True(t, step.IsInvalid(err))
		assert.Contains(t, err.Error(), "pod.terminationGracePeriodSeconds: Forbidden")
		assert.Contains(t, err.Error(), "Trainer v2.3+")
	}
}

func TestPodEnvClashIsNamed(t *testing.T) {
	s, err := step.Parse([]byte("framework: torch\ntrainer: {func: \"def f():\\n    pass\\n\", env: {HF_TOKEN: x}}\npod: {env: {HF_TOKEN: {secretKeyRef: {name: hf, key: t}}}}"))
	require.NoError(t, err)
	_, err = (&Planner{Trainers: trainers.Builtin(), Runtimes: stock.Source{}}).Plan(t.Context(), s, "team")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pod.env[HF_TOKEN]")
}

func TestAPIFromCRD(t *testing.T) {
	crd := func(spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"versions": []any{map[string]any{
			"name": "v1alpha1", "schema": map[string]any{"openAPIV3Schema": map[string]any{"properties": map[string]any{
				"spec": map[string]any{"properties": spec}}}}}}}}}
	}
	cmd := func(maxLen int64) map[string]any {
		items := map[string]any{"type": "string"}
		if maxLen > 0 {
			items["maxLength"] = maxLen
		}
		return map[string]any{"properties": map[string]any{"command": map[string]any{"items": items}}}
	}
	// runtimePatches' pod spec, as deep as v2.3 nests it: …replicatedJobs[].template.spec.template.spec.
	podSpec := func(fields ...string) map[string]any {
		props := map[string]any{}
		for _, f := range fields {
			props[f] = map[string]any{"type": "integer"}
		}
		at := map[string]any{"type": "object", "properties": props}
		for _, name := range []string{"spec", "template", "spec", "template", "items", "replicatedJobs", "spec", "template", "trainingRuntimeSpec"} {
			if name == "items" {
				at = map[string]any{"type": "array", "items": at}
				continue
			}
			at = map[string]any{"type": "object", "properties": map[string]any{name: at}}
		}
		return map[string]any{"type": "array", "items": at}
	}
	v23, err := APIFromCRD(crd(map[string]any{"runtimePatches": podSpec("nodeSelector", "terminationGracePeriodSeconds"), "activeDeadlineSeconds": map[string]any{}, "trainer": cmd(1048576)}))
	require.NoError(t, err)
	assert.Equal(t, PodRuntimePatches, v23.PodMechanism)
	assert.True(t, v23.ActiveDeadline)
	assert.True(t, v23.GracePeriod)
	assert.Equal(t, CommandItemV23, v23.MaxCommandItem)
	v22, err := APIFromCRD(crd(map[string]any{"runtimePatches": podSpec("nodeSelector"), "activeDeadlineSeconds": map[string]any{}, "trainer": cmd(65536)}))
	require.NoError(t, err)
	assert.Equal(t, CommandItemV22, v22.MaxCommandItem)
	assert.False(t, v22.GracePeriod)
	assert.Contains(t, v22.Source, "Trainer v2.2")
	v21, err := APIFromCRD(crd(map[string]any{"podTemplateOverrides": map[string]any{}, "trainer": cmd(0)}))
	require.NoError(t, err)
	assert.Equal(t, PodTemplateOverrides, v21.PodMechanism)
	assert.False(t, v21.ActiveDeadline)
	assert.Equal(t, CommandItemV22, v21.MaxCommandItem)
	_, err = APIFromCRD(&unstructured.Unstructured{Object: map[string]any{}})
	assert.Error(t, err)
}

func TestActiveDeadlineAndCommandLimitFollowTheInstalledTrainer(t *testing.T) {
	v22 := API{PodMechanism: PodRuntimePatches, ActiveDeadline: true, MaxCommandItem: CommandItemV22, Source: "test v2.2"}
	v21 := API{PodMechanism: PodTemplateOverrides, MaxCommandItem: CommandItemV22, Source: "test v2.1"}
	plan := func(y string, api *API) (*Plan, error) {
		s, err := step.Parse([]byte(y))
		require.NoError(t, err)
		return (&Planner{Trainers: trainers.Builtin(), Runtimes: stock.Source{}, API: api}).Plan(t.Context(), s, "team")
	}
	id := Identity{Engine: "test", OwnerUID: "u", StepKey: "k"}
	const fn = "framework: torch\ntrainer: {func: \"def f():\\n    pass\\n\"}\n"
	p, err := plan(fn+"timeout: 90.5s", &v22)
	require.NoError(t, err)
	assert.Equal(t, int64(91), p.TrainJob(id).Spec.ActiveDeadlineSeconds, "the step's timeout, rounded up")
	p, err = plan(fn+"timeout: 2h", nil)
	require.NoError(t, err)
	assert.Equal(t, int64(7200), p.TrainJob(id).Spec.ActiveDeadlineSeconds, "no cluster: v2.3 assumed")
	p, err = plan(fn+"timeout: 2h", &v21)
	require.NoError(t, err)
	assert.Zero(t, p.TrainJob(id).Spec.ActiveDeadlineSeconds, "v2.1 has no activeDeadlineSeconds")
	p, err = plan(fn+"timeout: 2h\nkeepOnTimeout: true", &v22)
	require.NoError(t, err)
	assert.Zero(t, p.TrainJob(id).Spec.ActiveDeadlineSeconds, "keepOnTimeout asks for the job to outlive the timeout")
	p, err = plan(fn, &v22)
	require.NoError(t, err)
	assert.Zero(t, p.TrainJob(id).Spec.ActiveDeadlineSeconds)

	big := "trainer: {kind: CustomTrainerContainer, image: ghcr.io/me/t:1, command: [python, -c], args: [\"" + strings.Repeat("x", 100*1024) + "\"]}"
	_, err = plan(big, &v22)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "trainer.args[0]")
	assert.Contains(t, err.Error(), "must be at most 65536 characters")
	_, err = plan(big, nil)
	require.NoError(t, err, "Trainer v2.3 takes items up to 1 MiB")
}

// Every pod of every replicated job carries trainstep's identity labels, with or without a pod
// block, through whichever pod-template mechanism the installed Trainer has: a face's pod cache
// selects its own pods by them.
func TestEveryPodTemplateCarriesTheIdentityLabels(t *testing.T) {
	id := Identity{Engine: "argo", OwnerUID: "0b5c1a5e-7d7e-4a37-9d5c-0f1e2d3c4b5a", StepKey: "wf.train"}
	want := map[string]string{LabelManagedBy: ManagedByValue, LabelEngine: "argo", LabelOwnerUID: id.OwnerUID}
	require.Equal(t, want, PodLabels(id))
	v21 := &API{PodMechanism: PodTemplateOverrides, MaxCommandItem: CommandItemV22, Source: "test v2.1"}
	v20 := &API{MaxCommandItem: CommandItemV22, Source: "test v2.0"}
	for _, tc := range []struct {
		name, step string
		api        *API
	}{
		{"runtimePatches, no pod block", "framework: deepspeed\ntrainer: {func: \"def f(): pass\"}", nil},
		{"runtimePatches, pod block", fmt.Sprintf(podStep, "deepspeed"), nil},
		{"podTemplateOverrides, no pod block", "framework: deepspeed\ntrainer: {func: \"def f(): pass\"}", v21},
		{"podTemplateOverrides, pod block", fmt.Sprintf(podStep, "deepspeed"), v21},
		{"no mechanism (v2.0)", "framework: deepspeed\ntrainer: {func: \"def f(): pass\"}", v20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := step.Parse([]byte(tc.step))
			require.NoError(t, err)
			p, err := (&Planner{Trainers: trainers.Builtin(), Runtimes: stock.Source{}, API: tc.api}).Plan(t.Context(), s, "team")
			require.NoError(t, err)
			obj, err := p.Object(id)
			require.NoError(t, err)
			u, err := runtimeToUnstructured(obj)
			require.NoError(t, err)
			got := map[string]map[string]any{}
			if rps, ok, _ := unstructured.NestedSlice(u, "spec", "runtimePatches"); ok {
				require.Len(t, rps, 1)
				rjs, _, _ := unstructured.NestedSlice(rps[0].(map[string]any), "trainingRuntimeSpec", "template", "spec", "replicatedJobs")
				for _, rj := range rjs {
					l, _, _ := unstructured.NestedMap(rj.(map[string]any), "template", "spec", "template", "metadata", "labels")
					got[rj.(map[string]any)["name"].(string)] = l
				}
			}
			if ovs, ok, _ := unstructured.NestedSlice(u, "spec", "podTemplateOverrides"); ok {
				for _, ov := range ovs {
					l, _, _ := unstructured.NestedMap(ov.(map[string]any), "metadata", "labels")
					targets, _, _ := unstructured.NestedSlice(ov.(map[string]any), "targetJobs")
					got[targets[0].(map[string]any)["name"].(string)] = l
				}
			}
			if tc.api == v20 {
				assert.Empty(t, got, "Trainer v2.0 has no pod template mechanism trainstep supports")
				return
			}
			names := []string{}
			for _, rj := range p.Runtime.ReplicatedJobs {
				names = append(names, rj.Name)
				assert.Equal(t, map[string]any{LabelManagedBy: ManagedByValue, LabelEngine: "argo", LabelOwnerUID: id.OwnerUID}, got[rj.Name], "pods of %s", rj.Name)
			}
			assert.Len(t, got, len(names), "one entry per replicated job: %v", names)
		})
	}
}

func runtimeToUnstructured(obj any) (map[string]any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.Object, nil
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
}
