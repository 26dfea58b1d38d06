package step

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Label and annotation keys under this prefix are trainstep's own bookkeeping.
const ReservedPrefix = "trainstep.dev/"

// Runtime kinds a step may name.
const (
	ClusterTrainingRuntime = "ClusterTrainingRuntime"
	TrainingRuntime        = "TrainingRuntime"
)

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate checks what can be checked without a trainer or a cluster.
func (s *Spec) Validate() field.ErrorList {
	errs := s.validateHeader()
	if s.Framework == "" && s.Trainer.Kind == "" {
		errs = append(errs, field.Required(field.NewPath("framework"),
			"set framework (torch, mpi, jax, xgboost, deepspeed, torchtune, …) or trainer.kind"))
	}
	if s.Framework != "" {
		errs = append(errs, validateFramework(s.Framework, field.NewPath("framework"))...)
	}
	if r := s.Runtime; r != nil {
		p := field.NewPath("runtime")
		if r.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), "name the runtime, or remove runtime to let trainstep discover one"))
		} else {
			for _, msg := range validation.IsDNS1123Subdomain(r.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), r.Name, msg))
			}
		}
		if r.Kind != "" && r.Kind != ClusterTrainingRuntime && r.Kind != TrainingRuntime {
			errs = append(errs, field.NotSupported(p.Child("kind"), r.Kind, []string{ClusterTrainingRuntime, TrainingRuntime}))
		}
	}
	if rc := s.RuntimeConfig; rc != nil {
		p := field.NewPath("runtimeConfig")
		errs = append(errs, ValidatePackages(rc.PackagesToInstall, p.Child("packagesToInstall"))...)
		errs = append(errs, ValidateIndexURLs(rc.PipIndexUrls, p.Child("pipIndexUrls"))...)
		errs = append(errs, ValidateEnv(rc.Env, p.Child("env"))...)
	}
	if in := s.Initializer; in != nil {
		p := field.NewPath("initializer")
		errs = append(errs, validateStorage(in.Dataset, p.Child("dataset"))...)
		errs = append(errs, validateStorage(in.Model, p.Child("model"))...)
	}
	errs = append(errs, s.Pod.Validate(field.NewPath("pod"))...)
	errs = append(errs, s.Checkpoint.Validate(field.NewPath("checkpoint"), s.Pod)...)
	errs = append(errs, s.Cache.Validate(field.NewPath("cache"))...)
	errs = append(errs, s.Retry.Validate(field.NewPath("retry"))...)
	errs = append(errs, validateMeta(s.Labels, field.NewPath("labels"), true)...)
	errs = append(errs, validateMeta(s.Annotations, field.NewPath("annotations"), false)...)
	errs = append(errs, ValidateNamePrefix(s.NamePrefix, field.NewPath("namePrefix"))...)
	if s.QueueName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(s.QueueName) {
			errs = append(errs, field.Invalid(field.NewPath("queueName"), s.QueueName, msg))
		}
	}
	if s.Timeout != nil && s.Timeout.Duration <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("timeout"), s.Timeout.String(), "must be positive, such as 2h"))
	}
	if s.StartTimeout != nil && s.StartTimeout.Duration <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("startTimeout"), s.StartTimeout.String(), "must be positive, such as 15m"))
	}
	if s.StartTimeout != nil && s.Timeout != nil && s.StartTimeout.Duration > s.Timeout.Duration {
		errs = append(errs, field.Invalid(field.NewPath("startTimeout"), s.StartTimeout.String(), fmt.Sprintf("must not be longer than timeout (%s): the step would time out first", s.Timeout.String())))
	}
	if s.HangTimeout != nil && s.HangTimeout.Duration <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("hangTimeout"), s.HangTimeout.String(), "must be positive, such as 30m"))
	}
	if s.KeepOnTimeout && s.Timeout == nil {
		errs = append(errs, field.Required(field.NewPath("timeout"), "keepOnTimeout needs a timeout"))
	}
	return errs
}

// foreignFrameworks are framework names a Kubeflow user brings from elsewhere (the Training
// Operator's PyTorchJob, PyTorch's own name) that no Trainer runtime is labelled with, and the
// trainer.kubeflow.org/framework value that means what they meant.
var foreignFrameworks = map[string]string{"pytorch": "torch"}

// validateFramework checks the framework as a label value, and names the Trainer's value for a
// framework the user calls by another name.
func validateFramework(fw string, p *field.Path) field.ErrorList {
	if want, ok := foreignFrameworks[strings.ToLower(fw)]; ok {
		return field.ErrorList{field.Invalid(p, fw, fmt.Sprintf(
			"the Trainer's runtimes for it are labelled trainer.kubeflow.org/framework: %s; write framework: %s", want, want))}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(fw) {
		errs = append(errs, field.Invalid(p, fw, msg))
	}
	return errs
}

// ValidateEnv checks environment variable names, each set once, and that no entries refer to
// each other in a cycle.
func ValidateEnv(env Env, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for _, e := range env {
		k := e.Name
		if !envName.MatchString(k) {
			errs = append(errs, field.Invalid(p.Key(k), k, "must be a valid environment variable name (letters, digits, _; not starting with a digit)"))
		}
		if seen[k] {
			errs = append(errs, field.Duplicate(p.Key(k), k))
		}
		seen[k] = true
	}
	return append(errs, envCycles(env, p)...)
}

// ValidatePackages checks pip requirement strings.
func ValidatePackages(pkgs []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, pkg := range pkgs {
		switch {
		case strings.TrimSpace(pkg) == "":
			errs = append(errs, field.Required(p.Index(i), "a package such as torch==2.3 or 'transformers[torch]'"))
		case strings.ContainsAny(pkg, "\n\r\x00"):
			errs = append(errs, field.Invalid(p.Index(i), pkg, "must be one line"))
		case strings.HasPrefix(pkg, "-"):
			errs = append(errs, field.Invalid(p.Index(i), pkg, "pip options are not packages; use pipIndexUrls for indexes"))
		}
	}
	return errs
}

// ValidateIndexURLs checks pip index URLs.
func ValidateIndexURLs(urls []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, u := range urls {
		parsed, err := url.Parse(u)
		if err != nil || parsed.Host == "" || (parsed.Scheme != "http" && parsed.Scheme != "https") {
			errs = append(errs, field.Invalid(p.Index(i), u, "must be an http(s) URL such as https://pypi.org/simple"))
		}
	}
	return errs
}

func validateStorage(s *StorageInitializer, p *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	if s.StorageURI == "" {
		errs = append(errs, field.Required(p.Child("storageUri"), "such as hf://tatsu-lab/alpaca or s3://bucket/path"))
	} else if u, err := url.Parse(s.StorageURI); err != nil || u.Scheme == "" || !strings.Contains(s.StorageURI, "://") {
		errs = append(errs, field.Invalid(p.Child("storageUri"), s.StorageURI, "must look like scheme://path, such as hf://tatsu-lab/alpaca"))
	}
	errs = append(errs, ValidateEnv(s.Env, p.Child("env"))...)
	return append(errs, validateSecretRef(s.SecretRef, p.Child("secretRef"))...)
}

// validateSecretRef checks the name, written alone or as {name} as the TrainJob has it: the
// path is the user's either way.
func validateSecretRef(r *SecretRef, p *field.Path) field.ErrorList {
	if r == nil {
		return nil
	}
	if r.Name == "" {
		return field.ErrorList{field.Required(p, "the Secret's name (secretRef: hf-token, or secretRef: {name: hf-token}), in the step's namespace")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(r.Name) {
		errs = append(errs, field.Invalid(p, r.Name, msg))
	}
	return errs
}

func validateMeta(m map[string]string, p *field.Path, isLabel bool) field.ErrorList {
	var errs field.ErrorList
	for k, v := range m {
		if strings.HasPrefix(k, ReservedPrefix) {
			errs = append(errs, field.Forbidden(p.Key(k), fmt.Sprintf("keys under %s are set by trainstep", ReservedPrefix)))
			continue
		}
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(p.Key(k), k, msg))
		}
		if isLabel {
			for _, msg := range validation.IsValidLabelValue(v) {
				errs = append(errs, field.Invalid(p.Key(k), v, msg))
			}
		}
	}
	return errs
}
