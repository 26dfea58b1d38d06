package step

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// An env reaches the pod in one order whatever order a face received it in: Argo's apiserver
// hands the plugin its keys sorted, `executor run` and Tekton read them as written.
func TestEnvIsInDependencyOrderWhateverOrderItWasWrittenIn(t *testing.T) {
	for _, tc := range []struct {
		name    string
		written []string // the same env in each order
		want    []string // the names, in the order the pod gets them
	}{
		{"no references: by name", []string{`{"B": "2", "A": "1", "C": "3"}`, `{"C": "3", "B": "2", "A": "1"}`}, []string{"A", "B", "C"}},
		{"an entry after the one it refers to", []string{`{"FILE": "$(ROOT)/x", "ROOT": "/data"}`, `{"ROOT": "/data", "FILE": "$(ROOT)/x"}`}, []string{"ROOT", "FILE"}},
		{"one placed first by name, the rest still in dependency order", []string{`{"B": "$(C)", "A": "a", "C": "c"}`}, []string{"A", "C", "B"}},
		{"a chain", []string{`{"A": "$(B)", "B": "$(C)", "C": "c"}`, `{"C": "c", "B": "$(C)", "A": "$(B)"}`}, []string{"C", "B", "A"}},
		{"$$ is a literal $, not a reference", []string{`{"A": "$$(B)", "B": "b"}`, `{"B": "b", "A": "$$(B)"}`}, []string{"A", "B"}},
		{"a reference to a name not in the env orders nothing", []string{`{"B": "$(HOME)", "A": "a"}`}, []string{"A", "B"}},
		{"a reference to itself orders nothing", []string{`{"B": "$(B)", "A": "a"}`}, []string{"A", "B"}},
		{"a cycle comes last, by name", []string{`{"Y": "$(X)", "X": "$(Y)", "A": "a"}`, `{"X": "$(Y)", "A": "a", "Y": "$(X)"}`}, []string{"A", "X", "Y"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, doc := range tc.written {
				var env Env
				require.NoError(t, json.Unmarshal([]byte(doc), &env))
				var names []string
				for _, v := range env {
					names = append(names, v.Name)
				}
				assert.Equal(t, tc.want, names, "written as %s", doc)
			}
		})
	}
}

func TestEnvReferencesThatCycleAreRefused(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want string // the error, "" for none
	}{
		{`{"FILE": "$(ROOT)/x", "ROOT": "/data"}`, ""},
		{`{"A": "$(B)", "B": "$(A)"}`, `trainer.env[A]: Invalid value: "$(B)": refers to $(B), which refers back to it: ` +
			`Kubernetes expands $(NAME) only from an entry set before it, so one of them would reach the pod unexpanded; write the value out in one of them`},
		{`{"A": "$(B)", "B": "$(C)", "C": "$$(A) $(A)"}`, `trainer.env[A]: Invalid value: "$(B)": refers to $(B)`},
	} {
		var env Env
		require.NoError(t, json.Unmarshal([]byte(tc.doc), &env))
		errs := ValidateEnv(env, field.NewPath("trainer", "env"))
		if tc.want == "" {
			assert.Empty(t, errs, tc.doc)
			continue
		}
		require.Len(t, errs, 1, tc.doc)
		assert.Contains(t, errs[0].Error(), tc.want, tc.doc)
	}
}

func TestVarReferences(t *testing.T) {
	for s, want := range map[string][]string{
		"":               nil,
		"plain":          nil,
		"$(A)":           {"A"},
		"$(A)/$(B)x":     {"A", "B"},
		"$$(A)":          nil,
		"$$$(A)":         {"A"},
		"$(A":            nil,
		"cost $5 $(A) $": {"A"},
		"$(A.b-c)":       {"A.b-c"},
		"$()$(A)":        {"", "A"},
	} {
		assert.Equal(t, want, varReferences(s), "%q", s)
	}
}
