package trainjob

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainers"
)

// Planner is the one path every face shares: step → validate → trainer → runtime → TrainJob parts.
type Planner struct {
	Trainers *trainers.Registry
	Runtimes runtimes.Source
	// API is what the installed Trainer accepts; when nil, Detector reads it from the cluster, and
	// with neither Trainer v2.3 is assumed (AssumedAPI: --local, stock runtimes).
	API      *API
	Detector *APIDetector
}

// Plan is a validated step bound to its trainer and runtime, ready to become a TrainJob.
type Plan struct {
	Spec      *step.Spec
	Namespace string
	Trainer   trainers.Trainer
	Runtime   runtimes.Runtime
	Parts     trainers.Parts
	// API is what the installed Trainer accepts; it decides how the pod block reaches the pods.
	API API
	// Warnings are worth telling the user (a deprecated runtime, say) but do not stop the step.
	Warnings []string
}

// Plan validates the step and binds it. Bad input comes back as a *step.InvalidError with every
// problem found; a failure to read runtimes is returned as it is (it may pass on a retry).
func (p *Planner) Plan(ctx context.Context, s *step.Spec, namespace string) (*Plan, error) {
	errs := s.Validate()
	var t trainers.Trainer
	// A framework Validate refused picks no trainer: resolving it would only refuse it again,
	// pointing elsewhere (a custom trainer for a framework that is a misspelling).
	if s.Trainer.Kind != "" || (s.Framework != "" && !refuses(errs, "framework")) {
		var terrs field.ErrorList
		t, terrs = p.Trainers.Resolve(s)
		errs = append(errs, terrs...)
	}
	if len(errs) > 0 {
		return nil, step.Invalid(errs)
	}
	catalog, err := p.Runtimes.List(ctx, namespace)
	if err != nil {
		return nil, fmt.Errorf("reading training runtimes: %w", err)
	}
	name, kind := "", ""
	if s.Runtime != nil {
		name, kind = s.Runtime.Name, s.Runtime.Kind
	}
	sel, ferr := runtimes.Select(catalog, t, name, kind)
	if ferr != nil {
		return nil, step.Invalid(field.ErrorList{ferr})
	}
	rt := sel.Runtime
	api := AssumedAPI
	switch {
	case p.API != nil:
		api = *p.API
	case p.Detector != nil:
		if api, err = p.Detector.Get(ctx); err != nil {
			return nil, err
		}
	}
	rt.MaxCommandItem = api.MaxCommandItem
	if in := s.Initializer; in != nil {
		if in.Dataset != nil && !rt.HasDatasetInitializer {
			errs = append(errs, field.Invalid(field.NewPath("initializer", "dataset"), in.Dataset.StorageURI,
				fmt.Sprintf("runtime %s has no dataset-initializer step; pick a runtime that has one or remove initializer.dataset", rt.Name)))
		}
		if in.Model != nil && !rt.HasModelInitializer {
			errs = append(errs, field.Invalid(field.NewPath("initializer", "model"), in.Model.StorageURI,
				fmt.Sprintf("runtime %s has no model-initializer step; pick a runtime that has one or remove initializer.model", rt.Name)))
		}
	}
	parts, berrs := t.Build(&rt, s.RuntimeConfig)
	errs = append(errs, berrs...)
	if len(errs) > 0 {
		return nil, step.Invalid(errs)
	}
	errs = append(errs, commandErrors(parts, api)...)
	if errs := append(errs, podErrors(s.Pod, api, parts.Env, rt.Policy)...); len(errs) > 0 {
		return nil, step.Invalid(errs)
	}
	if s.Pod != nil {
		parts.Env = append(parts.Env, s.Pod.CoreEnv()...)
		if len(s.Pod.EnvFrom) > 0 && !trainers.PrependToScript(&parts, trainers.EnvFromPrelude(s.Pod.EnvFromPrefixes(), containerEnvNames(parts.Env, &rt))) {
			return nil, step.Invalid(field.ErrorList{field.Forbidden(field.NewPath("pod", "envFrom"),
				"no Trainer release carries envFrom, so trainstep mounts each object and the command script exports its keys; "+
					"that needs a bash -c command (every function trainer, or a container command [bash, -c, script]); name each key in pod.env with secretKeyRef or configMapKeyRef instead")})
		}
		if errs := commandErrors(parts, api); len(errs) > 0 {
			return nil, step.Invalid(errs)
		}
	}
	if errs := checkpointEnvErrors(parts, s); len(errs) > 0 {
		return nil, step.Invalid(errs)
	}
	warnings := slices.Clone(sel.Warnings)
	if w := hangWarning(s, api); w != "" {
		warnings = append(warnings, w)
	}
	plan := &Plan{Spec: s, Namespace: namespace, Trainer: t, Runtime: rt, Parts: parts, API: api, Warnings: warnings}
	if errs := checkPodNames(&plan.Runtime, plan.NumNodes()); len(errs) > 0 {
		return nil, step.Invalid(errs)
	}
	return plan, nil
}

// hangWarning says, for a step with hangTimeout, when it can fire at all: only from the job's
// first progress report, which reaches the TrainJob only through the Trainer's status server
// (status.trainerStatus: Trainer v2.2+, with its TrainJobStatus feature gate on, off by
// default). Which the gate is, only the pods say (progressOff), once the job runs; an API
// without spec.activeDeadlineSeconds is older than v2.2, the release that brought both.
func hangWarning(s *step.Spec, api API) string {
	if s.HangTimeout == nil {
		return ""
	}
	if !api.ActiveDeadline {
		return fmt.Sprintf("hangTimeout never fires here: the installed Trainer (%s) has no status.trainerStatus (Trainer v2.2+), so no progress report reaches the TrainJob; only timeout bounds the step", api.Source)
	}
	return "hangTimeout counts only from the job's first progress report (report(), the Kubeflow SDK's update_trainjob_status, its Hugging Face callback), " +
		"and a report reaches the TrainJob only where the Trainer's TrainJobStatus feature gate is on (off by default): a job that never reports is never hung"
}

// refuses reports whether errs has an error on the field at path.
func refuses(errs field.ErrorList, path string) bool {
	return slices.ContainsFunc(errs, func(e *field.Error) bool { return e.Field == path })
}

// NumNodes is the node count the TrainJob will run with.
func (p *Plan) NumNodes() int32 {
	if p.Parts.NumNodes != nil {
		return *p.Parts.NumNodes
	}
	return p.Runtime.NumNodes
}

// TrainJob builds the object to submit, from the fields that work on Trainer v2.0.1 to v2.3.0:
// metadata labels/annotations (not spec.labels, gone in v2.2), runtimeRef, spec.trainer,
// spec.initializer.
func (p *Plan) TrainJob(id Identity) *trainer.TrainJob {
	labels := map[string]string{}
	for k, v := range p.Spec.Labels {
		labels[k] = v
	}
	if p.Spec.QueueName != "" {
		labels[LabelKueueQueue] = p.Spec.QueueName
	}
	for k, v := range id.Labels() {
		labels[k] = v
	}
	labels[LabelFramework] = p.Runtime.Framework
	labels[LabelNumNodes] = fmt.Sprint(p.NumNodes())
	annotations := map[string]string{}
	for k, v := range p.Spec.Annotations {
		annotations[k] = v
	}
	for k, v := range id.Annotations() {
		annotations[k] = v
	}
	annotations[AnnotationTrainer] = p.Trainer.Kind()
	annotations[AnnotationAccelerators] = strconv.FormatInt(p.Accelerators(), 10)

	tr := &trainer.Trainer{
		Command:          p.Parts.Command,
		Args:             p.Parts.Args,
		Env:              p.trainerEnv(id),
		NumNodes:         p.Parts.NumNodes,
		ResourcesPerNode: p.Parts.Resources,
		NumProcPerNode:   p.Parts.NumProcPerNode,
	}
	if p.Parts.Image != "" {
		tr.Image = ptr.To(p.Parts.Image)
	}
	tj := &trainer.TrainJob{
		TypeMeta: metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind},
		ObjectMeta: metav1.ObjectMeta{
			Name:        id.Name(),
			Namespace:   p.Namespace,
			Labels:      labels,
			Annotations: annotations,
		},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{
				Name:     p.Runtime.Name,
				APIGroup: ptr.To(runtimes.Group),
				Kind:     ptr.To(p.Runtime.Kind),
			},
			Trainer:     tr,
			Initializer: initializer(p.Spec.Initializer),
		},
	}
	if id.Owner != nil {
		tj.OwnerReferences = []metav1.OwnerReference{*id.Owner}
	}
	if p.API.PodMechanism == PodRuntimePatches {
		tj.Spec.RuntimePatches = runtimePatch(&p.Runtime, p.Spec.Pod, PodLabels(id))
	}
	tj.Spec.ActiveDeadlineSeconds = p.ActiveDeadlineSeconds()
	return tj
}

// ActiveDeadlineSeconds is spec.activeDeadlineSeconds on a Trainer that has it (v2.2+): the
// step's timeout in whole seconds, rounded up, so the Trainer stops the job even when no face is
// left to. trainstep's own timeout counts from creation and the Trainer's from the job's start
// (later, and reset on resume), so trainstep's normally fires first and deletes the job. Not set
// with keepOnTimeout, which asks for the job to outlive the timeout.
func (p *Plan) ActiveDeadlineSeconds() int64 {
	t := p.Spec.Timeout
	if !p.API.ActiveDeadline || t == nil || t.Duration <= 0 || p.Spec.KeepOnTimeout {
		return 0
	}
	return max(1, int64(math.Ceil(t.Seconds())))
}

// Object is the TrainJob to submit as the installed Trainer takes it: the typed TrainJob, or on
// Trainer v2.1 (spec.podTemplateOverrides, which the v2.3 API package no longer has) the same
// object as unstructured with the overrides added.
func (p *Plan) Object(id Identity) (client.Object, error) {
	tj := p.TrainJob(id)
	if p.API.PodMechanism != PodTemplateOverrides {
		return tj, nil
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tj)
	if err != nil {
		return nil, fmt.Errorf("rendering TrainJob %s: %w", tj.Name, err)
	}
	overrides, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&struct {
		O []PodTemplateOverride `json:"o"`
	}{podTemplateOverrides(&p.Runtime, p.Spec.Pod, PodLabels(id))})
	if err != nil {
		return nil, fmt.Errorf("rendering spec.podTemplateOverrides: %w", err)
	}
	if err := unstructured.SetNestedField(u, overrides["o"], "spec", "podTemplateOverrides"); err != nil {
		return nil, err
	}
	delete(u, "status")
	return &unstructured.Unstructured{Object: u}, nil
}

// commandErrors checks every command and args item against the installed Trainer's limit.
func commandErrors(parts trainers.Parts, api API) field.ErrorList {
	var errs field.ErrorList
	limit := trainers.UsableCommandItem(api.MaxCommandItem)
	for i, item := range append(slices.Clone(parts.Command), parts.Args...) {
		if len(item) <= limit {
			continue
		}
		p := field.NewPath("trainer", "command").Index(i)
		if i >= len(parts.Command) {
			p = field.NewPath("trainer", "args").Index(i - len(parts.Command))
		}
		errs = append(errs, field.Invalid(p, fmt.Sprintf("<%d characters>", len(item)),
			fmt.Sprintf("must be at most %d characters: the installed Trainer (%s) takes command items up to %d, and Linux a single argument up to %d", limit, api.Source, api.MaxCommandItem, trainers.MaxExecArg)))
	}
	return errs
}

// podErrors checks what the pod block needs of the installed Trainer and of the trainer's env.
// containerEnvNames are the names the node container's own env list will hold, the only ones
// that win over envFrom in Kubernetes: the step's env (trainer.env, runtimeConfig.env, the
// trainer's own, pod.env), the runtime's container env, what the Trainer injects for the policy,
// and the Job controller's JOB_COMPLETION_INDEX (JobSet's Jobs are Indexed).
func containerEnvNames(env []corev1.EnvVar, rt *runtimes.Runtime) []string {
	names := append([]string{"JOB_COMPLETION_INDEX"}, trainers.InjectedEnv(rt.Policy)...)
	for _, e := range env {
		names = append(names, e.Name)
	}
	for _, e := range rt.Env {
		names = append(names, e.Name)
	}
	return names
}

// checkpointEnvErrors refuses a step that sets, in trainer.env, runtimeConfig.env or pod.env,
// an env name its checkpoint block sets (TrainJob adds that env, per attempt).
func checkpointEnvErrors(parts trainers.Parts, s *step.Spec) field.ErrorList {
	if s.Checkpoint == nil {
		return nil
	}
	for _, have := range parts.Env {
		if slices.Contains(step.CheckpointEnvNames, have.Name) {
			return field.ErrorList{field.Invalid(field.NewPath("checkpoint"), have.Name,
				fmt.Sprintf("sets %s, which trainer.env, runtimeConfig.env or pod.env also sets; remove it there (the checkpoint block sets it) or remove the checkpoint block", have.Name))}
		}
	}
	return nil
}

// trainerEnv is the trainer container's env for one attempt: the step's, then its checkpoint
// location and attempt. The location is the same on every node and every attempt of the step
// (step.StepPath of the identity), which is what lets a retry, a new TrainJob, find what the
// one before it saved.
func (p *Plan) trainerEnv(id Identity) []corev1.EnvVar {
	ckpt := p.Spec.Checkpoint.Env(p.Spec.Pod, step.StepPath(id.OwnerUID, id.StepKey), id.Attempt)
	if len(ckpt) == 0 {
		return p.Parts.Env
	}
	return append(slices.Clone(p.Parts.Env), ckpt...)
}

func podErrors(pod *step.Pod, api API, env []corev1.EnvVar, policy runtimes.Policy) field.ErrorList {
	if pod == nil {
		return nil
	}
	var errs field.ErrorList
	if hasPodFields(pod) && api.PodMechanism == "" {
		errs = append(errs, field.Forbidden(field.NewPath("pod"),
			"the installed Trainer ("+api.Source+") has neither spec.runtimePatches (v2.2+) nor spec.podTemplateOverrides (v2.1); upgrade the Trainer, or set these in the runtime's pod template"))
	}
	if pod.TerminationGracePeriodSeconds != nil && api.PodMechanism != "" && !api.GracePeriod {
		errs = append(errs, field.Forbidden(field.NewPath("pod", "terminationGracePeriodSeconds"),
			"the installed Trainer ("+api.Source+") takes no terminationGracePeriodSeconds in a TrainJob (Trainer v2.3+ does, in spec.runtimePatches); upgrade the Trainer, or set it in the pod template of a runtime of your own"))
	}
	reserved := trainers.InjectedEnv(policy)
	for _, n := range pod.EnvNames() {
		if slices.Contains(reserved, n) {
			errs = append(errs, trainers.ReservedEnvError(field.NewPath("pod", "env").Key(n), policy))
			continue
		}
		for _, e := range env {
			if e.Name == n {
				errs = append(errs, field.Duplicate(field.NewPath("pod", "env").Key(n), n+" is also set by trainer.env, runtimeConfig.env or the trainer itself; set it in one place"))
			}
		}
	}
	return errs
}

func initializer(in *step.Initializer) *trainer.Initializer {
	if in == nil || (in.Dataset == nil && in.Model == nil) {
		return nil
	}
	out := &trainer.Initializer{}
	if d := in.Dataset; d != nil {
		out.Dataset = &trainer.DatasetInitializer{StorageUri: ptr.To(d.StorageURI), Env: envVars(d.Env), SecretRef: secretRef(d.SecretRef)}
	}
	if m := in.Model; m != nil {
		out.Model = &trainer.ModelInitializer{StorageUri: ptr.To(m.StorageURI), Env: envVars(m.Env), SecretRef: secretRef(m.SecretRef)}
	}
	return out
}

func secretRef(r *step.SecretRef) *corev1.LocalObjectReference {
	if r == nil || r.Name == "" {
		return nil
	}
	return &corev1.LocalObjectReference{Name: r.Name}
}

// envVars keeps the user's order: Kubernetes expands $(VAR) only from earlier entries.
func envVars(env step.Env) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range env {
		out = append(out, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}
	return out
}
