package step

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The order of an Env is not the order it was written in, which not every face receives: Argo
// hands the plugin its template as the apiserver stored it, keys sorted, while `executor run` and
// the Tekton face read the text. Kubernetes expands $(VAR) only from entries before it, so the
// order a step's env reaches its pods in is the dependency order: each entry after the entries of
// the same env it refers to, and otherwise by name. Every face then submits the same TrainJob
// (and the step cache keys it the same), and {ROOT: /data, FILE: $(ROOT)/x} expands on Argo too.

// dependencyOrder is env in that order. Entries in a cycle of references, which no order can
// expand, come last by name; ValidateEnv refuses them.
func dependencyOrder(env Env) Env {
	if len(env) < 2 {
		return env
	}
	refs := envReferences(env)
	out := make(Env, 0, len(env))
	placed := map[string]bool{}
	rest := slices.Clone(env)
	slices.SortStableFunc(rest, func(a, b EnvVar) int { return strings.Compare(a.Name, b.Name) })
	for len(rest) > 0 {
		i := slices.IndexFunc(rest, func(v EnvVar) bool {
			return !slices.ContainsFunc(refs[v.Name], func(r string) bool { return !placed[r] })
		})
		if i < 0 {
			return append(out, rest...) // a cycle: nothing left can go first
		}
		out = append(out, rest[i])
		placed[rest[i].Name] = true
		rest = slices.Delete(rest, i, i+1)
	}
	return out
}

// envReferences maps each entry's name to the other entries of env its value refers to.
func envReferences(env Env) map[string][]string {
	names := map[string]bool{}
	for _, v := range env {
		names[v.Name] = true
	}
	refs := map[string][]string{}
	for _, v := range env {
		for _, r := range varReferences(v.Value) {
			if names[r] && r != v.Name && !slices.Contains(refs[v.Name], r) {
				refs[v.Name] = append(refs[v.Name], r)
			}
		}
	}
	return refs
}

// varReferences is the names a value refers to as $(NAME), as Kubernetes reads them: $$ is a
// literal $, and $(NAME) without its closing parenthesis is text.
func varReferences(s string) []string {
	var names []string
	for i := 0; i < len(s)-1; i++ {
		if s[i] != '$' {
			continue
		}
		switch s[i+1] {
		case '$':
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				return names
			}
			names = append(names, s[i+2:i+2+end])
			i += 2 + end
		}
	}
	return names
}

// envCycles refuses entries of env that refer to each other in a cycle, which Kubernetes cannot
// expand whatever their order: the one that comes first reaches the pod with $(NAME) as text. It
// names the first such entry, once: mending it may mend the others.
func envCycles(env Env, p *field.Path) field.ErrorList {
	ordered := dependencyOrder(env)
	refs := envReferences(env)
	placed := map[string]bool{}
	for _, v := range ordered {
		var back []string
		for _, r := range refs[v.Name] {
			if !placed[r] {
				back = append(back, "$("+r+")")
			}
		}
		placed[v.Name] = true
		if len(back) > 0 {
			return field.ErrorList{field.Invalid(p.Key(v.Name), v.Value, "refers to "+strings.Join(back, ", ")+
				", which refers back to it: Kubernetes expands $(NAME) only from an entry set before it, so one of them would reach the pod unexpanded; write the value out in one of them")}
		}
	}
	return nil
}
