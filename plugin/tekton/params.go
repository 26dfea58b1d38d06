package tekton

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
)

// ParamStep is the param that carries a whole step as YAML or JSON. Every other param is a dotted
// path into the step (framework, trainer.numNodes, initializer.dataset.storageUri, …) whose
// value replaces what the step or customSpec says there.
const ParamStep = "step"

// invalidParamsError is bad input on the Tekton side: every problem, each naming its param.
type invalidParamsError struct{ problems []string }

func (e *invalidParamsError) Error() string {
	if len(e.problems) == 1 {
		return "invalid params: " + e.problems[0]
	}
	return fmt.Sprintf("invalid params (%d problems):\n  - %s", len(e.problems), strings.Join(e.problems, "\n  - "))
}

// source records which param (or the customSpec) set a step path, to name it in errors.
type source struct {
	path  string // dotted step path the param set; "" for the whole step
	param string // the param's name, or "customSpec.spec"
}

// specFromRun builds the step from the run: customSpec.spec as the base, the step param over it,
// then each path param. It returns the step and where each part came from.
func specFromRun(run *v1beta1.CustomRun) (*step.Spec, []source, error) {
	doc := step.Object{}
	var sources []source
	var problems []string
	if cs := run.Spec.CustomSpec; cs != nil && len(cs.Spec.Raw) > 0 {
		if err := json.Unmarshal(cs.Spec.Raw, &doc); err != nil || doc == nil {
			why := "got null"
			if err != nil {
				why = err.Error()
			}
			problems = append(problems, "customSpec.spec: must be a step object: "+why)
			doc = step.Object{}
		}
		sources = append(sources, source{param: "customSpec.spec"})
	}
	params := append([]v1beta1.Param(nil), run.Spec.Params...)
	// The whole step first, so path params override it whatever their order.
	sort.SliceStable(params, func(i, j int) bool { return params[i].Name == ParamStep && params[j].Name != ParamStep })
	seen := map[string]bool{}
	for _, p := range params {
		if seen[p.Name] {
			problems = append(problems, fmt.Sprintf("param %q: given twice", p.Name))
			continue
		}
		seen[p.Name] = true
		if p.Name == ParamStep {
			base, err := stepDocument(p.Value)
			if err != nil {
				problems = append(problems, fmt.Sprintf("param %q: %v", p.Name, err))
				continue
			}
			doc = merge(doc, base)
			sources = append(sources, source{param: p.Name})
			continue
		}
		path, err := paramPath(p.Name)
		if err != nil {
			problems = append(problems, fmt.Sprintf("param %q: %v", p.Name, err))
			continue
		}
		doc = setPath(doc, path, paramValue(path, p.Value))
		sources = append(sources, source{path: p.Name, param: p.Name})
	}
	if len(problems) > 0 {
		return nil, sources, &invalidParamsError{problems: problems}
	}
	js, err := json.Marshal(doc)
	if err != nil {
		return nil, sources, &invalidParamsError{problems: []string{fmt.Sprintf("encoding the step: %v", err)}}
	}
	s, err := step.Parse(js)
	if err != nil {
		return nil, sources, explain(err, sources)
	}
	return s, sources, nil
}

// stepDocument reads the step param like a step file: keys in order, numbers as written.
func stepDocument(v v1beta1.ParamValue) (step.Object, error) {
	var js []byte
	switch v.Type {
	case v1beta1.ParamTypeObject:
		return nil, fmt.Errorf("must be a string holding the step as YAML or JSON, not an object")
	case v1beta1.ParamTypeArray:
		return nil, fmt.Errorf("must be a string holding the step as YAML or JSON, not an array")
	}
	js, err := step.YAMLToJSON([]byte(v.StringVal))
	if err != nil {
		return nil, err // names the line and says "not valid YAML or JSON"
	}
	var doc step.Object
	if err := json.Unmarshal(js, &doc); err != nil {
		return nil, fmt.Errorf("must hold a step object (framework, trainer, …): %w", err)
	}
	return doc, nil
}

var pathSegment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

func paramPath(name string) ([]string, error) {
	parts := strings.Split(name, ".")
	for _, p := range parts {
		if !pathSegment.MatchString(p) {
			return nil, fmt.Errorf("is neither %q nor a dotted path into the step such as framework or trainer.numNodes", ParamStep)
		}
	}
	return parts, nil
}

// merge lays src over dst, object by object; keys dst has keep their place, new ones follow.
func merge(dst, src step.Object) step.Object {
	for _, m := range src {
		if sm, ok := m.Value.(step.Object); ok {
			if old, _ := dst.Get(m.Key); old != nil {
				if dm, ok := old.(step.Object); ok {
					dst.Set(m.Key, merge(dm, sm))
					continue
				}
			}
		}
		dst.Set(m.Key, m.Value)
	}
	return dst
}

// setPath sets the value at a dotted path, making the objects on the way; an object value is
// merged into an object already there.
func setPath(doc step.Object, path []string, v any) step.Object {
	old, _ := doc.Get(path[0])
	oldObj, isObj := old.(step.Object)
	if len(path) == 1 {
		if m, ok := v.(step.Object); ok && isObj {
			v = merge(oldObj, m)
		}
		doc.Set(path[0], v)
		return doc
	}
	doc.Set(path[0], setPath(oldObj, path[1:], v))
	return doc
}

// paramValue turns a Tekton value into a JSON value for the step path. Tekton values are strings,
// so a string that reads as a number or a boolean becomes one, unless the step field there is a
// string (a label, an env value, a storage URI): then it stays a string.
func paramValue(path []string, v v1beta1.ParamValue) any {
	switch v.Type {
	case v1beta1.ParamTypeArray:
		out := make([]any, len(v.ArrayVal))
		for i, s := range v.ArrayVal {
			out[i] = s
		}
		return out
	case v1beta1.ParamTypeObject:
		keys := make([]string, 0, len(v.ObjectVal))
		for k := range v.ObjectVal {
			keys = append(keys, k)
		}
		sort.Strings(keys) // Tekton's object values have no order
		out := make(step.Object, 0, len(keys))
		for _, k := range keys {
			out = append(out, step.Member{Key: k, Value: scalar(append(append([]string(nil), path...), k), v.ObjectVal[k])})
		}
		return out
	}
	return scalar(path, v.StringVal)
}

var (
	intLike   = regexp.MustCompile(`^-?\d+$`)
	floatLike = regexp.MustCompile(`^-?\d*\.\d+([eE][-+]?\d+)?$`)
)

func scalar(path []string, s string) any {
	if stringField(path) {
		return s
	}
	switch {
	case s == "true":
		return true
	case s == "false":
		return false
	case intLike.MatchString(s), floatLike.MatchString(s):
		return json.Number(s)
	}
	return s
}

var specType = reflect.TypeFor[step.Spec]()

// stringField reports whether the step field at path is a string (or a string map's value),
// found by walking step.Spec's JSON names. Paths into the trainer's own fields are not known
// here (each trainer decodes its own), so they count as not string.
func stringField(path []string) bool {
	t := specType
	for i, seg := range path {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t == reflect.TypeFor[step.TrainerSpec]() {
			return i == len(path)-1 && seg == "kind"
		}
		if t == reflect.TypeFor[step.Env]() { // NAME: value
			return i == len(path)-1
		}
		switch t.Kind() {
		case reflect.Struct:
			f, ok := fieldByJSONName(t, seg)
			if !ok {
				return false
			}
			t = f.Type
		case reflect.Map:
			t = t.Elem()
		default:
			return false
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.String
}

func fieldByJSONName(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if strings.Split(f.Tag.Get("json"), ",")[0] == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// explain rewrites the step's field errors so each names the param that set the field.
func explain(err error, sources []source) error {
	var ie *step.InvalidError
	if !errors.As(err, &ie) {
		return err
	}
	out := &invalidParamsError{}
	for _, fe := range ie.Errs {
		out.problems = append(out.problems, fmt.Sprintf("%s: %s", paramFor(fe, sources), step.ErrorText(fe)))
	}
	return out
}

// paramFor names the param that set the field: the longest path param that is the field or a
// parent of it, else the step param or the customSpec.
func paramFor(fe *field.Error, sources []source) string {
	best, bestLen := "", -1
	for _, s := range sources {
		if s.path == "" {
			if bestLen < 0 {
				best, bestLen = s.param, 0
			}
			continue
		}
		if (fe.Field == s.path || strings.HasPrefix(fe.Field, s.path+".") || strings.HasPrefix(fe.Field, s.path+"[")) && len(s.path) > bestLen {
			best, bestLen = s.param, len(s.path)
		}
	}
	if best == "" {
		if fe.Field == "" || fe.Field == "<nil>" {
			return "params"
		}
		return fmt.Sprintf("no param sets %s", fe.Field)
	}
	if best == "customSpec.spec" {
		return best
	}
	return fmt.Sprintf("param %q", best)
}
