package argo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/pkg/plugins/executor"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainjob"
)

// Fields of the plugin body that belong to the face, not to the step spec.
const (
	fieldKey     = "key"
	fieldAttempt = "attempt"
)

// request is one execute call translated: who the step is, what it runs and how long it may take.
type request struct {
	Workflow  executor.ObjectMeta
	Spec      *step.Spec
	Key       string
	Attempt   int
	Timeout   time.Duration // 0: none
	Declared  []string      // template.outputs.parameters names
	Namespace string
}

// pluginBody returns the body under our key, or nil when the template is not ours.
func pluginBody(tmpl *wfv1.Template, key string) (json.RawMessage, error) {
	if tmpl == nil || tmpl.Plugin == nil || len(tmpl.Plugin.Value) == 0 {
		return nil, nil
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(tmpl.Plugin.Value, &keys); err != nil {
		return nil, fmt.Errorf("template.plugin is not a JSON object: %w", err)
	}
	return keys[key], nil
}

// parseRequest validates everything the face adds to the step spec: the identity fields, the
// template's timeout and its declared outputs. Bad input comes back as a *step.InvalidError.
func parseRequest(args executor.ExecuteTemplateArgs, key string, body json.RawMessage) (*request, error) {
	base := field.NewPath("plugin", key)
	switch {
	case args.Workflow == nil:
		return nil, step.Invalid(field.ErrorList{field.Required(field.NewPath("workflow"), "the request names no workflow")})
	case args.Template == nil:
		return nil, step.Invalid(field.ErrorList{field.Required(field.NewPath("template"), "the request has no template")})
	}
	var errs field.ErrorList
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return nil, step.Invalid(field.ErrorList{field.Invalid(base, string(body), "must be an object: the step spec plus key and attempt")})
	}
	r := &request{Workflow: args.Workflow.ObjectMeta, Namespace: args.Workflow.ObjectMeta.Namespace}

	r.Key, errs = parseKey(base, fields)
	var aerrs field.ErrorList
	r.Attempt, aerrs = parseAttempt(base, fields, args.Template.RetryStrategy != nil)
	errs = append(errs, aerrs...)

	rest, err := json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("re-encoding the step spec: %w", err)
	}
	spec, err := step.Parse(rest)
	if err != nil {
		if step.IsInvalid(err) {
			return nil, prefixed(base, err, errs)
		}
		return nil, err
	}
	r.Spec = spec

	timeout, terrs := templateTimeout(args.Template)
	errs = append(errs, terrs...)
	if spec.Timeout != nil && spec.Timeout.Duration > 0 && (timeout == 0 || spec.Timeout.Duration < timeout) {
		timeout = spec.Timeout.Duration
	}
	r.Timeout = timeout

	var derrs field.ErrorList
	r.Declared, derrs = declaredOutputs(args.Template.Outputs.Parameters, spec)
	errs = append(errs, derrs...)
	if len(errs) > 0 {
		return nil, step.Invalid(errs)
	}
	return r, nil
}

// parseKey takes the step key out of the plugin's fields: required, and substituted by Argo.
func parseKey(base *field.Path, fields map[string]json.RawMessage) (string, field.ErrorList) {
	key := stringField(fields[fieldKey])
	delete(fields, fieldKey)
	switch {
	case key == "":
		return key, field.ErrorList{field.Required(base.Child(fieldKey), `set key: "{{node.name}}" so each step of the workflow gets its own TrainJob`)}
	case strings.Contains(key, "{{"):
		return key, field.ErrorList{field.Invalid(base.Child(fieldKey), key, "was not substituted by Argo; use {{node.name}}")}
	}
	return key, nil
}

// parseAttempt takes the attempt out of the plugin's fields: a whole number, required when the
// template has a retryStrategy (without it every retry would land on the failed TrainJob).
func parseAttempt(base *field.Path, fields map[string]json.RawMessage, retried bool) (int, field.ErrorList) {
	attempt, ok := fields[fieldAttempt]
	delete(fields, fieldAttempt)
	if !ok {
		if retried {
			return 0, field.ErrorList{field.Required(base.Child(fieldAttempt),
				`the template has a retryStrategy: set attempt: "{{retries}}" so a retry gets a fresh TrainJob instead of the failed one`)}
		}
		return 0, nil
	}
	s := stringField(attempt)
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return n, field.ErrorList{field.Invalid(base.Child(fieldAttempt), s, `must be a whole number; use attempt: "{{retries}}" with a retryStrategy`)}
	}
	return n, nil
}

// declaredOutputs are the names of the template's output parameters, each one trainstep fills:
// the resume outputs only for a step with a checkpoint block, the cache outputs only for one
// with a cache block (Argo would leave them unset).
func declaredOutputs(params []wfv1.Parameter, spec *step.Spec) ([]string, field.ErrorList) {
	var (
		names []string
		errs  field.ErrorList
	)
	known := slices.Concat(trainjob.OutputNames, trainjob.ResumeOutputNames, trainjob.CacheOutputNames)
	for i, p := range params {
		name := field.NewPath("outputs", "parameters").Index(i).Child("name")
		switch {
		case slices.Contains(trainjob.ResumeOutputNames, p.Name) && spec.Checkpoint == nil:
			errs = append(errs, field.Invalid(name, p.Name,
				"is written only by a step with a checkpoint block, which this step has not (docs/resume.md); add one, or drop this output"))
		case slices.Contains(trainjob.CacheOutputNames, p.Name) && spec.Cache == nil:
			errs = append(errs, field.Invalid(name, p.Name,
				"is written only by a step with a cache block, which this step has not (docs/cache.md); add one, or drop this output"))
		case !slices.Contains(known, p.Name) && !trainjob.IsResultKeyOutput(p.Name) && !trainjob.IsMetricOutput(p.Name):
			errs = append(errs, field.NotSupported(name, p.Name,
				append(known, trainjob.ResultKeyPrefix+"<key of the returned dict>", trainjob.MetricPrefix+"<metric name>")))
		}
		names = append(names, p.Name)
	}
	return names, errs
}

// prefixed re-roots the step's own field errors under plugin.<key> so the message names the
// field as the user wrote it in the template.
func prefixed(base *field.Path, err error, errs field.ErrorList) error {
	var inv *step.InvalidError
	if errors.As(err, &inv) {
		for _, e := range inv.Errs {
			c := *e
			c.Field = base.String() + "." + e.Field
			if e.Field == "" || e.Field == "<nil>" { // the whole step
				c.Field = base.String()
			}
			errs = append(errs, &c)
		}
		return step.Invalid(errs)
	}
	return step.Invalid(append(errs, field.Invalid(base, "", err.Error())))
}

// templateTimeout reads template.timeout (a duration, or seconds) and activeDeadlineSeconds: Argo
// enforces neither on a running plugin node, so the plugin does.
func templateTimeout(t *wfv1.Template) (time.Duration, field.ErrorList) {
	var errs field.ErrorList
	var d time.Duration
	if s := strings.TrimSpace(t.Timeout); s != "" {
		if v, err := strconv.Atoi(s); err == nil {
			d = time.Duration(v) * time.Second
		} else if v, err := time.ParseDuration(s); err == nil {
			d = v
		} else {
			errs = append(errs, field.Invalid(field.NewPath("timeout"), s, "must be a duration such as 30m"))
		}
	}
	if a := t.ActiveDeadlineSeconds; a != nil {
		v, err := strconv.Atoi(a.String())
		if err != nil {
			errs = append(errs, field.Invalid(field.NewPath("activeDeadlineSeconds"), a.String(), "must be a whole number of seconds"))
		} else if s := time.Duration(v) * time.Second; s > 0 && (d == 0 || s < d) {
			d = s
		}
	}
	return d, errs
}

// stringField accepts a JSON string or number (Argo substitutes {{retries}} as a string, but a
// user may write a literal number).
func stringField(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strings.TrimSpace(s)
	}
	return string(raw)
}

// identity names the TrainJob of this request: the workflow UID, the step key, the attempt and
// the run (see runOf), owned by the Workflow so deleting the Workflow deletes it; the step's
// namePrefix, if any, is how the name reads.
func (r *request) identity(run string) trainjob.Identity {
	id := trainjob.Identity{
		Engine:   Engine,
		OwnerUID: r.Workflow.UID,
		StepKey:  r.Key,
		Attempt:  r.Attempt,
		Run:      run,
		Owner:    workflowOwner(r.Workflow.Name, r.Workflow.UID),
	}
	if r.Spec != nil {
		id.NamePrefix = r.Spec.NamePrefix
	}
	return id
}

// identityIn is the request's identity in the workflow's current run: its run part and when
// that run started (a TrainJob an earlier release made without the run part is this run's only
// if made since, see trainjob.Identity.Adopts).
func (r *request) identityIn(wf *wfv1.Workflow) trainjob.Identity {
	id := r.identity(runOf(wf))
	if wf != nil {
		id.RunStarted = wf.Status.StartedAt.Time
	}
	return id
}

// deadlines are the step's bounds for the core's follow policy.
func (r *request) deadlines() trainjob.Deadlines {
	d := trainjob.StepDeadlines(r.Spec)
	d.Timeout = r.Timeout
	return d
}
