package trainers

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reprSource makes the function report what Python received: type and repr of each argument,
// in the order the keyword arguments arrived.
const reprSource = `
def check(**kw):
    import json
    def show(v):
        if isinstance(v, dict):
            return {"type": "dict", "items": [[k, show(x)] for k, x in v.items()]}
        return {"type": type(v).__name__, "repr": repr(v)}
    with open("got.json", "w", encoding="utf-8") as f:
        json.dump([[k, show(v)] for k, v in kw.items()], f, ensure_ascii=False)
`

type pyArg struct {
	name, typ, repr string
}

// pyArgs parses a step, builds its command for a plain runtime and runs it with python3.
func pyArgs(t *testing.T, doc string) []pyArg {
	t.Helper()
	_, p := build(t, doc, xgbRT)
	python, err := exec.LookPath("python3")
	require.NoError(t, err, "these tests run the generated script with Python 3")
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.Mkdir(bin, 0o755))
	require.NoError(t, os.Symlink(python, filepath.Join(bin, "python")))
	c := exec.CommandContext(t.Context(), p.Command[0], p.Command[1:]...)
	c.Dir = dir
	c.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	out, err := c.CombinedOutput()
	require.NoError(t, err, string(out))
	b, err := os.ReadFile(filepath.Join(dir, "got.json"))
	require.NoError(t, err, string(out))
	var got []any
	require.NoError(t, json.Unmarshal(b, &got))
	var args []pyArg
	for _, kv := range got {
		kv := kv.([]any)
		v := kv[1].(map[string]any)
		repr, _ := v["repr"].(string)
		if v["type"] == "dict" {
			repr = fmt.Sprint(v["items"])
		}
		args = append(args, pyArg{kv[0].(string), v["type"].(string), repr})
	}
	return args
}

var wantArgs = []pyArg{
	{"learning_rate", "float", "2.0"},
	{"neg_zero", "float", "-0.0"},
	{"big", "int", "123456789012345678901234567890"},
	{"huge_neg", "int", "-98765432109876543210"},
	{"one", "int", "1"},
	{"exp", "float", "1000.0"},
	{"small", "float", "0.00015"},
	{"word", "str", "'1.0'"},
	{"yes", "bool", "True"},
	{"nothing", "NoneType", "None"},
	{"nested", "dict", "[[z map[repr:1.0 type:float]] [a map[repr:2 type:int]]]"},
	{"alpha", "list", "[1, 1.5, -0.0]"},
}

func TestFuncArgsKeepTheirTypeAndOrder(t *testing.T) {
	cases := map[string]string{
		"yaml": `
framework: xgboost
trainer:
  func: "def check(**kw): pass"
  funcArgs:
    learning_rate: 2.0
    neg_zero: -0.0
    big: 123456789012345678901234567890
    huge_neg: -98765432109876543210
    one: 1
    exp: 1e3
    small: 1.5e-4
    word: "1.0"
    yes: true
    nothing: null
    nested: {z: 1.0, a: 2}
    alpha: [1, 1.5, -0.0]
`,
		"json": `{"framework": "xgboost", "trainer": {"func": "def check(**kw): pass", "funcArgs": {
  "learning_rate": 2.0, "neg_zero": -0.0, "big": 123456789012345678901234567890,
  "huge_neg": -98765432109876543210, "one": 1, "exp": 1e3, "small": 1.5e-4, "word": "1.0",
  "yes": true, "nothing": null, "nested": {"z": 1.0, "a": 2}, "alpha": [1, 1.5, -0.0]}}}`,
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			// The trainer's func is replaced by the reporting one; only funcArgs matter here.
			doc = replaceFunc(doc)
			assert.Equal(t, wantArgs, pyArgs(t, doc))
		})
	}
}

func replaceFunc(doc string) string {
	src, _ := json.Marshal(reprSource)
	return regexpFunc.ReplaceAllLiteralString(doc, `"func": `+string(src))
}

func TestEnvKeepsTheUsersOrder(t *testing.T) {
	_, p := build(t, `
framework: torch
trainer:
  func: "def f(): pass"
  maxRestarts: 2
  env:
    ROOT: /data
    FILE: $(ROOT)/x
    A_LAST: $(FILE).bak
`, torchRT)
	var names []string
	for _, e := range p.Env {
		names = append(names, e.Name)
	}
	assert.Equal(t, []string{"ROOT", "FILE", "A_LAST", "PET_MAX_RESTARTS"}, names,
		"Kubernetes expands $(VAR) only from earlier entries; trainstep's own come last")
}

var regexpFunc = regexp.MustCompile(`"?func"?: "def check\(\*\*kw\): pass"`)
