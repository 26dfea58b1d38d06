package step

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	stringType     = reflect.TypeOf("")
	errBadDuration = errors.New(`must be a duration such as "90m" or "2h", or a number of seconds`)
	unmarshalerT   = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
	shorthandT     = reflect.TypeOf((*interface{ shorthand() })(nil)).Elem()
	objectType     = reflect.TypeOf(Object(nil))
	envType        = reflect.TypeOf(Env(nil))
)

// DecodeStrict decodes JSON into out and reports, against path, every key that out does not
// declare (with the closest known key as a hint) and every value of the wrong type. Numbers held in
// interface values stay json.Number, so 1 and 1.0 remain distinguishable (Python cares).
// Trainers use it for their own fields so a typo anywhere in a step is refused by name.
func DecodeStrict(raw []byte, out any, path *field.Path) field.ErrorList {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = []byte("{}")
	}
	var generic any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&generic); err != nil {
		return field.ErrorList{field.Invalid(path, "", fmt.Sprintf("is not valid JSON or YAML: %v", err))}
	}
	errs := unknownKeys(generic, reflect.TypeOf(out), path)
	if len(errs) > 0 {
		return errs
	}
	dec = json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(out); err != nil {
		return field.ErrorList{typeError(err, generic, path)}
	}
	return nil
}

// unknownKeys walks the decoded value beside the Go type it will land in.
func unknownKeys(v any, t reflect.Type, path *field.Path) field.ErrorList {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerT) && !reflect.PointerTo(t).Implements(shorthandT) {
		return nil // custom decoding owns its keys (TrainerSpec, Duration)
	}
	var errs field.ErrorList
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil // a type error; reported by the second pass
		}
		fields := JSONFields(t)
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ft, known := fields[k]
			if !known {
				errs = append(errs, field.Invalid(path.Child(k), k, unknownMessage(k, fields)))
				continue
			}
			errs = append(errs, unknownKeys(obj[k], ft, path.Child(k))...)
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		for k, e := range obj {
			errs = append(errs, unknownKeys(e, t.Elem(), path.Key(k))...)
		}
	case reflect.Slice:
		arr, ok := v.([]any)
		if !ok {
			return nil
		}
		for i, e := range arr {
			errs = append(errs, unknownKeys(e, t.Elem(), path.Index(i))...)
		}
	}
	return errs
}

// JSONFields maps the JSON keys of a struct (embedded structs flattened) to their types, as
// encoding/json reads them: an untagged field is keyed by its Go name. The strict decoder and the
// JSON Schema generator both use it, so what the schema offers is what the parser takes.
func JSONFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			for k, v := range JSONFields(ft) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func unknownMessage(key string, fields map[string]reflect.Type) string {
	known := make([]string, 0, len(fields))
	for k := range fields {
		known = append(known, k)
	}
	sort.Strings(known)
	best, bestDist := "", 1<<30
	for _, k := range known {
		if d := editDistance(strings.ToLower(key), strings.ToLower(k)); d < bestDist {
			best, bestDist = k, d
		}
	}
	msg := "unknown field"
	if own, ok := foreignFields[key]; ok {
		if _, here := fields[own.field]; here {
			return msg + "; " + own.hint + " (known fields here: " + strings.Join(known, ", ") + ")"
		}
	}
	for _, k := range known {
		// "packages" for "packagesToInstall": a prefix is as good a hint as a typo.
		if len(key) >= 4 && strings.HasPrefix(strings.ToLower(k), strings.ToLower(key)) {
			best, bestDist = k, 0
			break
		}
	}
	if best != "" && bestDist <= max(2, len(key)/3) {
		msg += fmt.Sprintf("; did you mean %q?", best)
	}
	return msg + " (known fields here: " + strings.Join(known, ", ") + ")"
}

// foreignFields are the names the Kubeflow SDK or the TrainJob API use for what a trainstep
// field does: a user who writes them gets trainstep's field, not only the spelling nearest.
var foreignFields = map[string]struct{ field, hint string }{
	"runtimePatches":       {"pod", "trainstep's field for it is pod (nodeSelector, tolerations, volumes, env from Secrets, …): trainstep writes spec.runtimePatches or spec.podTemplateOverrides, whichever the installed Trainer has"},
	"podTemplateOverrides": {"pod", "trainstep's field for it is pod: trainstep writes spec.runtimePatches or spec.podTemplateOverrides, whichever the installed Trainer has"},
	"podSpecOverrides":     {"pod", "trainstep's field for it is pod: trainstep writes spec.runtimePatches or spec.podTemplateOverrides, whichever the installed Trainer has"},
	"runtime_patches":      {"pod", "trainstep's field for it is pod: trainstep writes spec.runtimePatches or spec.podTemplateOverrides, whichever the installed Trainer has"},
	// The SDK's initializers put credentials in plain env (ACCESS_TOKEN, …); a step is kept in
	// pipelines and git, so it names a Secret whose keys become that env instead.
	"accessToken":     {"secretRef", secretHint("ACCESS_TOKEN", "access_token", "hf-token")},
	"access_token":    {"secretRef", secretHint("ACCESS_TOKEN", "access_token", "hf-token")},
	"accessKeyId":     {"secretRef", secretHint("ACCESS_KEY_ID", "access_key_id", "s3-credentials")},
	"secretAccessKey": {"secretRef", secretHint("SECRET_ACCESS_KEY", "secret_access_key", "s3-credentials")},
}

func secretHint(env, sdk, secret string) string {
	return fmt.Sprintf("a credential never goes in the step: put it in a Secret under the key %s (the env the SDK's %s becomes, which the Trainer's initializer reads) and name the Secret: secretRef: %s", env, sdk, secret)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// typeError turns a decoding error into a field error on the user's own path.
func typeError(err error, generic any, path *field.Path) *field.Error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		// encoding/json names embedded structs by their Go names (Function.Common.numNodes);
		// the user wrote trainer.numNodes, so keep only the JSON keys.
		var parts []string
		for _, part := range strings.Split(te.Field, ".") {
			if part != "" && !unicode.IsUpper(rune(part[0])) {
				parts = append(parts, part)
			}
		}
		p := path
		for _, part := range parts {
			p = p.Child(part)
		}
		v := lookup(generic, strings.Join(parts, "."))
		if env, ok := v.(map[string]any); ok && te.Type == stringType {
			return envValueError(p, env)
		}
		return field.Invalid(p, v, "must be "+describe(te.Type))
	}
	if errors.Is(err, errBadDuration) {
		// Duration only decodes at the top level of a Spec ("timeout").
		return field.Invalid(path.Child("timeout"), lookup(generic, "timeout"), errBadDuration.Error())
	}
	return field.Invalid(path, "", err.Error())
}

// envValueError names the env entry that is not a string (encoding/json reports only the env
// map) and, for a Kubernetes-style valueFrom, the field that takes one.
func envValueError(p *field.Path, env map[string]any) *field.Error {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := env[k]
		if _, ok := v.(string); ok {
			continue
		}
		msg := "must be a string (quote numbers and booleans)"
		if obj, ok := v.(map[string]any); ok {
			if _, vf := obj["valueFrom"]; vf || obj["secretKeyRef"] != nil || obj["configMapKeyRef"] != nil {
				msg = fmt.Sprintf("must be a string; a value from a Secret or ConfigMap goes in pod.env instead: pod: {env: {%s: {secretKeyRef: {name: …, key: …}}}} (or configMapKeyRef)", k)
			}
		}
		return field.Invalid(p.Key(k), v, msg)
	}
	return field.Invalid(p, env, "must be an object of strings")
}

func lookup(v any, dotted string) any {
	if dotted == "" {
		return v
	}
	for _, part := range strings.Split(dotted, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[part]
	}
	return v
}

func describe(t reflect.Type) string {
	if t == objectType || t == envType {
		return "an object (key: value)"
	}
	if t == secretRefType {
		return "a Secret's name, or {name: <Secret's name>}"
	}
	if t == runtimeRefType {
		return "a runtime's name, or {name: <runtime's name>, kind: …}"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Map, reflect.Struct:
		return "an object (key: value)"
	case reflect.Slice:
		return "a list"
	}
	return "a " + t.String()
}
