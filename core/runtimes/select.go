package runtimes

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Trainer is what selection needs of a trainer: its frameworks in preference order and its own
// runtime check (framework label, trainer type, policy).
type Trainer interface {
	Kind() string
	Frameworks() []string
	ValidateRuntime(r *Runtime) *field.Error
}

// Selection is the chosen runtime and what the user should hear about it.
type Selection struct {
	Runtime  Runtime
	Warnings []string
}

// Select picks the runtime for a trainer. name/kind come from the step's runtime block (empty name
// means discover). Errors are field errors on the step, naming the fix.
func Select(c Catalog, t Trainer, name, kind string) (Selection, *field.Error) {
	if name != "" {
		return selectExplicit(c, t, name, kind)
	}
	var matching []Runtime
	for _, fw := range t.Frameworks() {
		matching = matching[:0]
		for _, r := range c.Runtimes {
			if r.Framework == fw && r.HiddenBy == "" {
				matching = append(matching, r)
			}
		}
		if len(matching) > 0 {
			break
		}
	}
	p := field.NewPath("runtime")
	switch len(matching) {
	case 0:
		return Selection{}, field.Required(p, fmt.Sprintf("no runtime for %s, which needs framework %s; available: %s%s",
			t.Kind(), orList(t.Frameworks()), describe(c.Runtimes), describeSkipped(c.Skipped)))
	case 1:
		r := matching[0]
		if err := t.ValidateRuntime(&r); err != nil {
			return Selection{}, err
		}
		return Selection{Runtime: r, Warnings: warnings(&r)}, nil
	default:
		names := make([]string, len(matching))
		for i, r := range matching {
			names[i] = r.Name
		}
		return Selection{}, field.Invalid(p, "", fmt.Sprintf("%d runtimes have framework %q: %s; pick one with runtime.name (and runtime.kind)",
			len(matching), matching[0].Framework, strings.Join(names, ", ")))
	}
}

func selectExplicit(c Catalog, t Trainer, name, kind string) (Selection, *field.Error) {
	p := field.NewPath("runtime", "name")
	for _, r := range c.Runtimes {
		if r.Name != name || (kind != "" && r.Kind != kind) || (kind == "" && r.HiddenBy != "") {
			continue
		}
		if err := t.ValidateRuntime(&r); err != nil {
			return Selection{}, err
		}
		return Selection{Runtime: r, Warnings: warnings(&r)}, nil
	}
	for _, s := range c.Skipped {
		if s.Name == name && (kind == "" || s.Kind == kind) {
			return Selection{}, field.Invalid(p, name, fmt.Sprintf("%s %s cannot be used: %s", s.Kind, name, s.Reason))
		}
	}
	what := "runtime"
	if kind != "" {
		what = kind
	}
	return Selection{}, &field.Error{Type: field.ErrorTypeNotFound, Field: p.String(), BadValue: name,
		Detail: fmt.Sprintf("no %s named %q; available: %s", what, name, describe(c.Runtimes))}
}

func warnings(r *Runtime) []string {
	if !r.Deprecated {
		return nil
	}
	return []string{fmt.Sprintf("runtime %s is marked %s=%s and may be removed in a later Trainer release", r.Name, SupportLabel, Deprecated)}
}

func describe(rs []Runtime) string {
	if len(rs) == 0 {
		return "none (install the Kubeflow Trainer runtimes, or name one with runtime.name)"
	}
	var parts []string
	for _, r := range rs {
		if r.HiddenBy == "" {
			parts = append(parts, fmt.Sprintf("%s (framework %s)", r.Name, r.Framework))
		}
	}
	return strings.Join(parts, ", ")
}

func describeSkipped(ss []Skipped) string {
	if len(ss) == 0 {
		return ""
	}
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = fmt.Sprintf("%s (%s)", s.Name, s.Reason)
	}
	return "; skipped: " + strings.Join(parts, ", ")
}

func orList(fws []string) string {
	q := make([]string, len(fws))
	for i, f := range fws {
		q[i] = fmt.Sprintf("%q", f)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// Has reports whether the framework is one the trainer declares.
func Has(t Trainer, framework string) bool { return slices.Contains(t.Frameworks(), framework) }
