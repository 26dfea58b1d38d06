package step

import (
	"fmt"
	"path"
	"reflect"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Pod is where the step's pods run and what they run with: placement, identity, storage and
// secrets. It is neither training logic (trainer) nor environment preparation (KEP-285's
// runtimeConfig): it is the pod template, which the Trainer only lets a TrainJob change through
// spec.runtimePatches (v2.2+) or spec.podTemplateOverrides (v2.0/v2.1). Scheduling and pod-level
// fields apply to every replicated job of the runtime (initializers too, so a job's pods land and
// pull alike); volumeMounts apply to the trainer container ("node", in the node and launcher jobs).
type Pod struct {
	NodeSelector map[string]string   `json:"nodeSelector,omitempty"`
	Tolerations  []corev1.Toleration `json:"tolerations,omitempty"`
	Affinity     *corev1.Affinity    `json:"affinity,omitempty"`
	// PriorityClassName is refused with the alternative: no Trainer release lets a TrainJob set it.
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// TerminationGracePeriodSeconds is the time a stopped pod has between SIGTERM and SIGKILL:
	// what on_sigterm's last save may take (docs/resume.md). Trainer v2.3+ only.
	TerminationGracePeriodSeconds *int64   `json:"terminationGracePeriodSeconds,omitempty"`
	SchedulingGates               []string `json:"schedulingGates,omitempty"`
	ServiceAccountName            string   `json:"serviceAccountName,omitempty"`
	ImagePullSecrets              []string `json:"imagePullSecrets,omitempty"`
	Volumes                       []Volume `json:"volumes,omitempty"`
	// VolumeMounts mount Volumes into the trainer container.
	VolumeMounts []VolumeMount `json:"volumeMounts,omitempty"`
	// Env sets trainer env from Secret or ConfigMap keys (spec.trainer.env valueFrom).
	Env map[string]EnvSource `json:"env,omitempty"`
	// EnvFrom exports every key of a Secret or ConfigMap into the trainer's env. No Trainer
	// release carries envFrom, so each object is mounted read-only at EnvFromDir/<i> and the
	// command script exports its keys (a bash -c command: every function trainer).
	EnvFrom []corev1.EnvFromSource `json:"envFrom,omitempty"`
}

// EnvFromDir is where pod.envFrom objects are mounted, and ReservedVolumePrefix the names of
// their volumes; the step's own volumes and mounts stay clear of both.
const (
	EnvFromDir           = "/var/run/trainstep/env-from"
	ReservedVolumePrefix = "trainstep-"
)

// Volume is one pod volume in Kubernetes' own shape: a name and exactly one source. Every source
// a pod takes is accepted (persistentVolumeClaim, secret, configMap, emptyDir, csi, nfs,
// ephemeral, projected, downwardAPI, image, …) except hostPath (see hostPathReason).
type Volume struct {
	Name                string `json:"name"`
	corev1.VolumeSource `json:",inline"`
}

// VolumeMount mounts a Volume into the trainer container.
type VolumeMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
	SubPath   string `json:"subPath,omitempty"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
}

// EnvSource is one key of a Secret or a ConfigMap.
type EnvSource struct {
	SecretKeyRef    *corev1.SecretKeySelector    `json:"secretKeyRef,omitempty"`
	ConfigMapKeyRef *corev1.ConfigMapKeySelector `json:"configMapKeyRef,omitempty"`
}

// EnvNames lists pod.env's names, sorted: the order the TrainJob carries them in.
func (pod *Pod) EnvNames() []string {
	out := make([]string, 0, len(pod.Env))
	for k := range pod.Env {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// CoreVolumes renders the volumes in Kubernetes' type, then one per envFrom source.
func (pod *Pod) CoreVolumes() []corev1.Volume {
	var out []corev1.Volume
	for _, v := range pod.Volumes {
		out = append(out, corev1.Volume{Name: v.Name, VolumeSource: *v.VolumeSource.DeepCopy()})
	}
	for i, e := range pod.EnvFrom {
		v := corev1.Volume{Name: envFromVolume(i)}
		if r := e.SecretRef; r != nil {
			v.Secret = &corev1.SecretVolumeSource{SecretName: r.Name, Optional: r.Optional}
		}
		if r := e.ConfigMapRef; r != nil {
			v.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: r.LocalObjectReference, Optional: r.Optional}
		}
		out = append(out, v)
	}
	return out
}

// CoreVolumeMounts renders the mounts in Kubernetes' type, then the envFrom sources' (read-only).
func (pod *Pod) CoreVolumeMounts() []corev1.VolumeMount {
	var out []corev1.VolumeMount
	for _, m := range pod.VolumeMounts {
		out = append(out, corev1.VolumeMount{Name: m.Name, MountPath: m.MountPath, SubPath: m.SubPath, ReadOnly: m.ReadOnly})
	}
	for i := range pod.EnvFrom {
		out = append(out, corev1.VolumeMount{Name: envFromVolume(i), MountPath: fmt.Sprintf("%s/%d", EnvFromDir, i), ReadOnly: true})
	}
	return out
}

// EnvFromPrefixes lists each envFrom source's prefix, in order.
func (pod *Pod) EnvFromPrefixes() []string {
	var out []string
	for _, e := range pod.EnvFrom {
		out = append(out, e.Prefix)
	}
	return out
}

func envFromVolume(i int) string { return fmt.Sprintf("%senv-from-%d", ReservedVolumePrefix, i) }

// CoreEnv renders pod.env as env entries with valueFrom, sorted by name.
func (pod *Pod) CoreEnv() []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, n := range pod.EnvNames() {
		s := pod.Env[n]
		out = append(out, corev1.EnvVar{Name: n, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: s.SecretKeyRef, ConfigMapKeyRef: s.ConfigMapKeyRef}})
	}
	return out
}

var (
	tolerationOps     = []string{string(corev1.TolerationOpExists), string(corev1.TolerationOpEqual)}
	tolerationEffects = []string{string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}
)

// Validate checks the pod block; every problem names its field under p.
func (pod *Pod) Validate(p *field.Path) field.ErrorList {
	if pod == nil {
		return nil
	}
	var errs field.ErrorList
	for k, v := range pod.NodeSelector {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(p.Child("nodeSelector").Key(k), k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(p.Child("nodeSelector").Key(k), v, msg))
		}
	}
	for i, t := range pod.Tolerations {
		errs = append(errs, validateToleration(t, p.Child("tolerations").Index(i))...)
	}
	errs = append(errs, validateAffinity(pod.Affinity, p.Child("affinity"))...)
	if pod.PriorityClassName != "" {
		errs = append(errs, field.Forbidden(p.Child("priorityClassName"),
			"no Trainer release (v2.0–v2.3) lets a TrainJob set a pod's priority (neither runtimePatches nor podTemplateOverrides has it); set priorityClassName in the runtime's pod template, or with Kueue label the step kueue.x-k8s.io/priority-class: <WorkloadPriorityClass>"))
	}
	if g := pod.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(p.Child("terminationGracePeriodSeconds"), *g, "must be 0 or more seconds"))
	}
	errs = append(errs, uniqueNames(pod.SchedulingGates, p.Child("schedulingGates"), validation.IsQualifiedName)...)
	if pod.ServiceAccountName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(pod.ServiceAccountName) {
			errs = append(errs, field.Invalid(p.Child("serviceAccountName"), pod.ServiceAccountName, msg))
		}
	}
	errs = append(errs, uniqueNames(pod.ImagePullSecrets, p.Child("imagePullSecrets"), validation.IsDNS1123Subdomain)...)
	volumes := map[string]bool{}
	for i, v := range pod.Volumes {
		vp := p.Child("volumes").Index(i)
		errs = append(errs, validateVolume(v, vp)...)
		if volumes[v.Name] {
			errs = append(errs, field.Duplicate(vp.Child("name"), v.Name))
		}
		if strings.HasPrefix(v.Name, ReservedVolumePrefix) {
			errs = append(errs, field.Forbidden(vp.Child("name"), "names starting "+ReservedVolumePrefix+" are trainstep's (pod.envFrom)"))
		}
		volumes[v.Name] = true
	}
	paths := map[string]bool{}
	for i, m := range pod.VolumeMounts {
		mp := p.Child("volumeMounts").Index(i)
		switch {
		case m.Name == "":
			errs = append(errs, field.Required(mp.Child("name"), "the name of one of pod.volumes"))
		case !volumes[m.Name]:
			errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
		}
		switch {
		case m.MountPath == "":
			errs = append(errs, field.Required(mp.Child("mountPath"), "an absolute path such as /data"))
		case !path.IsAbs(m.MountPath) || strings.Contains(m.MountPath, ":"):
			errs = append(errs, field.Invalid(mp.Child("mountPath"), m.MountPath, "must be an absolute path without ':', such as /data"))
		case paths[path.Clean(m.MountPath)]:
			errs = append(errs, field.Duplicate(mp.Child("mountPath"), m.MountPath))
		case path.Clean(m.MountPath) == path.Dir(EnvFromDir) || strings.HasPrefix(path.Clean(m.MountPath)+"/", path.Dir(EnvFromDir)+"/"):
			errs = append(errs, field.Forbidden(mp.Child("mountPath"), path.Dir(EnvFromDir)+" is trainstep's (pod.envFrom)"))
		}
		paths[path.Clean(m.MountPath)] = true
		if m.SubPath != "" && (path.IsAbs(m.SubPath) || strings.HasPrefix(path.Clean(m.SubPath), "..")) {
			errs = append(errs, field.Invalid(mp.Child("subPath"), m.SubPath, "must be a relative path inside the volume"))
		}
	}
	for _, n := range pod.EnvNames() {
		ep := p.Child("env").Key(n)
		if !envName.MatchString(n) {
			errs = append(errs, field.Invalid(ep, n, "must be a valid environment variable name (letters, digits, _; not starting with a digit)"))
		}
		errs = append(errs, validateEnvSource(pod.Env[n], ep)...)
	}
	for i, e := range pod.EnvFrom {
		errs = append(errs, validateEnvFrom(e, p.Child("envFrom").Index(i))...)
	}
	return errs
}

func validateEnvFrom(e corev1.EnvFromSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if e.Prefix != "" && !envName.MatchString(e.Prefix) {
		errs = append(errs, field.Invalid(p.Child("prefix"), e.Prefix, "must start a valid environment variable name (letters, digits, _; not starting with a digit)"))
	}
	check := func(fp *field.Path, name string) {
		if name == "" {
			errs = append(errs, field.Required(fp.Child("name"), "the object's name, in the step's namespace"))
			return
		}
		for _, msg := range validation.IsDNS1123Subdomain(name) {
			errs = append(errs, field.Invalid(fp.Child("name"), name, msg))
		}
	}
	switch {
	case e.SecretRef != nil && e.ConfigMapRef != nil:
		errs = append(errs, field.Invalid(p, "", "must have one of secretRef or configMapRef, not both"))
	case e.SecretRef != nil:
		check(p.Child("secretRef"), e.SecretRef.Name)
	case e.ConfigMapRef != nil:
		check(p.Child("configMapRef"), e.ConfigMapRef.Name)
	default:
		errs = append(errs, field.Required(p, "secretRef: {name} or configMapRef: {name}"))
	}
	return errs
}

func uniqueNames(names []string, p *field.Path, check func(string) []string) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, n := range names {
		for _, msg := range check(n) {
			errs = append(errs, field.Invalid(p.Index(i), n, msg))
		}
		if seen[n] {
			errs = append(errs, field.Duplicate(p.Index(i), n))
		}
		seen[n] = true
	}
	return errs
}

func validateToleration(t corev1.Toleration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, field.Invalid(p.Child("key"), t.Key, msg))
		}
	}
	switch t.Operator {
	case "", corev1.TolerationOpEqual:
		if t.Key == "" {
			errs = append(errs, field.Invalid(p.Child("operator"), t.Operator, "must be Exists when key is empty (a toleration of every taint)"))
		}
		for _, msg := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, field.Invalid(p.Child("value"), t.Value, msg))
		}
	case corev1.TolerationOpExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(p.Child("value"), t.Value, "must be empty when operator is Exists"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("operator"), t.Operator, tolerationOps))
	}
	if t.Effect != "" && !contains(tolerationEffects, string(t.Effect)) {
		errs = append(errs, field.NotSupported(p.Child("effect"), t.Effect, tolerationEffects))
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		errs = append(errs, field.Invalid(p.Child("tolerationSeconds"), *t.TolerationSeconds, "only applies with effect NoExecute"))
	}
	return errs
}

var selectorOps = []string{string(corev1.NodeSelectorOpIn), string(corev1.NodeSelectorOpNotIn), string(corev1.NodeSelectorOpExists),
	string(corev1.NodeSelectorOpDoesNotExist), string(corev1.NodeSelectorOpGt), string(corev1.NodeSelectorOpLt)}

// validateAffinity checks the node-affinity expressions (the part users write most and get wrong);
// pod (anti-)affinity is checked by the apiserver when the Trainer creates the pods.
func validateAffinity(a *corev1.Affinity, p *field.Path) field.ErrorList {
	if a == nil || a.NodeAffinity == nil {
		return nil
	}
	var errs field.ErrorList
	na := p.Child("nodeAffinity")
	checkTerm := func(t corev1.NodeSelectorTerm, tp *field.Path) {
		for i, r := range t.MatchExpressions {
			rp := tp.Child("matchExpressions").Index(i)
			for _, msg := range validation.IsQualifiedName(r.Key) {
				errs = append(errs, field.Invalid(rp.Child("key"), r.Key, msg))
			}
			switch r.Operator {
			case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
				if len(r.Values) == 0 {
					errs = append(errs, field.Required(rp.Child("values"), fmt.Sprintf("operator %s needs values", r.Operator)))
				}
			case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
				if len(r.Values) > 0 {
					errs = append(errs, field.Invalid(rp.Child("values"), r.Values, fmt.Sprintf("must be empty with operator %s", r.Operator)))
				}
			case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
				if len(r.Values) != 1 {
					errs = append(errs, field.Invalid(rp.Child("values"), r.Values, fmt.Sprintf("operator %s needs exactly one integer value", r.Operator)))
				}
			default:
				errs = append(errs, field.NotSupported(rp.Child("operator"), r.Operator, selectorOps))
			}
		}
	}
	if r := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
		rp := na.Child("requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
		if len(r.NodeSelectorTerms) == 0 {
			errs = append(errs, field.Required(rp, "at least one term"))
		}
		for i, t := range r.NodeSelectorTerms {
			checkTerm(t, rp.Index(i))
		}
	}
	for i, t := range a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		tp := na.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
		if t.Weight < 1 || t.Weight > 100 {
			errs = append(errs, field.Invalid(tp.Child("weight"), t.Weight, "must be 1 to 100"))
		}
		checkTerm(t.Preference, tp.Child("preference"))
	}
	return errs
}

// hostPathReason is why pod.volumes refuses hostPath. A training step is portable work the
// pipeline hands to whichever nodes the scheduler picks; a hostPath ties it to what one node's
// disk holds and lets its pods read and write the node itself. Pod Security's baseline and
// restricted levels refuse it too, but only when the Job creates the pods, long after the step
// started. A cluster admin who means it (a node-local model cache, say) puts it in the runtime's
// pod template, which is theirs.
const hostPathReason = "a training step must not mount the node's own filesystem: it ties the job to what one node's disk holds " +
	"and gives its pods the node's files (Pod Security baseline and restricted refuse it anyway, only later, when the pods are created); " +
	"use a persistentVolumeClaim, or an nfs, csi, ephemeral or image volume; a node-local path the cluster admin means to share belongs in the runtime's pod template"

func validateVolume(v Volume, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if v.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), "a name for volumeMounts to refer to"))
	} else {
		for _, msg := range validation.IsDNS1123Label(v.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), v.Name, msg))
		}
	}
	if v.HostPath != nil {
		return append(errs, field.Forbidden(p.Child("hostPath"), hostPathReason))
	}
	switch set := volumeSources(v.VolumeSource); len(set) {
	case 0:
		errs = append(errs, field.Required(p, "one volume source, such as persistentVolumeClaim: {claimName: …}, secret, configMap, emptyDir, csi, nfs, ephemeral, projected or image"))
	case 1:
		errs = append(errs, validateVolumeSource(v.VolumeSource, p)...)
	default:
		errs = append(errs, field.Invalid(p, v.Name, fmt.Sprintf("must have exactly one volume source (has %s)", strings.Join(set, ", "))))
	}
	return errs
}

// volumeSources lists the sources set on vs, by their JSON names.
func volumeSources(vs corev1.VolumeSource) []string {
	var set []string
	rv := reflect.ValueOf(vs)
	for i := range rv.NumField() {
		if f := rv.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			name, _, _ := strings.Cut(rv.Type().Field(i).Tag.Get("json"), ",")
			set = append(set, name)
		}
	}
	return set
}

// validateVolumeSource checks what a user gets wrong most in the sources users write most: a
// missing name or driver. The rest of a source is the apiserver's to check when the pods are
// created.
func validateVolumeSource(vs corev1.VolumeSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	name := func(fp *field.Path, s string, what string) {
		if s == "" {
			errs = append(errs, field.Required(fp, what))
			return
		}
		for _, msg := range validation.IsDNS1123Subdomain(s) {
			errs = append(errs, field.Invalid(fp, s, msg))
		}
	}
	required := func(fp *field.Path, s string, what string) {
		if s == "" {
			errs = append(errs, field.Required(fp, what))
		}
	}
	switch {
	case vs.PersistentVolumeClaim != nil:
		name(p.Child("persistentVolumeClaim", "claimName"), vs.PersistentVolumeClaim.ClaimName, "the PersistentVolumeClaim's name, in the step's namespace")
	case vs.Secret != nil:
		name(p.Child("secret", "secretName"), vs.Secret.SecretName, "the Secret's name, in the step's namespace")
	case vs.ConfigMap != nil:
		name(p.Child("configMap", "name"), vs.ConfigMap.Name, "the ConfigMap's name, in the step's namespace")
	case vs.EmptyDir != nil:
		errs = append(errs, validateEmptyDir(vs.EmptyDir, p.Child("emptyDir"))...)
	case vs.CSI != nil:
		required(p.Child("csi", "driver"), vs.CSI.Driver, "the CSI driver's name, such as secrets-store.csi.k8s.io")
	case vs.NFS != nil:
		required(p.Child("nfs", "server"), vs.NFS.Server, "the NFS server's host name or address")
		if !path.IsAbs(vs.NFS.Path) {
			errs = append(errs, field.Invalid(p.Child("nfs", "path"), vs.NFS.Path, "must be the exported path, absolute, such as /exports/datasets"))
		}
	case vs.Ephemeral != nil:
		if vs.Ephemeral.VolumeClaimTemplate == nil {
			errs = append(errs, field.Required(p.Child("ephemeral", "volumeClaimTemplate"), "the claim each pod gets: {spec: {accessModes, resources, storageClassName}}"))
		}
	case vs.Image != nil:
		required(p.Child("image", "reference"), vs.Image.Reference, "the image (an OCI artifact such as a model) to mount, such as ghcr.io/org/model:v1")
	}
	return errs
}

// emptyDirMedia are the media Kubernetes takes for an emptyDir; HugePages-<size> also.
var emptyDirMedia = []string{"", string(corev1.StorageMediumMemory), string(corev1.StorageMediumHugePages), "HugePages-<size>"}

func validateEmptyDir(e *corev1.EmptyDirVolumeSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch m := e.Medium; {
	case m == corev1.StorageMediumDefault, m == corev1.StorageMediumMemory, m == corev1.StorageMediumHugePages,
		strings.HasPrefix(string(m), string(corev1.StorageMediumHugePagesPrefix)):
	default:
		errs = append(errs, field.NotSupported(p.Child("medium"), m, emptyDirMedia))
	}
	if e.SizeLimit != nil && e.SizeLimit.Sign() <= 0 {
		errs = append(errs, field.Invalid(p.Child("sizeLimit"), e.SizeLimit.String(), "must be positive, such as 10Gi"))
	}
	return errs
}

func validateEnvSource(s EnvSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	check := func(fp *field.Path, name, key string) {
		if name == "" {
			errs = append(errs, field.Required(fp.Child("name"), "the object's name, in the step's namespace"))
		} else {
			for _, msg := range validation.IsDNS1123Subdomain(name) {
				errs = append(errs, field.Invalid(fp.Child("name"), name, msg))
			}
		}
		if key == "" {
			errs = append(errs, field.Required(fp.Child("key"), "the key whose value becomes the variable"))
		} else {
			for _, msg := range validation.IsConfigMapKey(key) {
				errs = append(errs, field.Invalid(fp.Child("key"), key, msg))
			}
		}
	}
	switch {
	case s.SecretKeyRef != nil && s.ConfigMapKeyRef != nil:
		errs = append(errs, field.Invalid(p, "", "must have one of secretKeyRef or configMapKeyRef, not both"))
	case s.SecretKeyRef != nil:
		check(p.Child("secretKeyRef"), s.SecretKeyRef.Name, s.SecretKeyRef.Key)
	case s.ConfigMapKeyRef != nil:
		check(p.Child("configMapKeyRef"), s.ConfigMapKeyRef.Name, s.ConfigMapKeyRef.Key)
	default:
		errs = append(errs, field.Required(p, "secretKeyRef: {name, key} or configMapKeyRef: {name, key}; plain values go in trainer.env"))
	}
	return errs
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
