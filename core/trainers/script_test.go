package trainers

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/step"
)

// The function under test writes what it received, and two literals that bash would have
// expanded had the heredoc not been quoted.
const echoSource = `
def check(**kw):
    import json
    with open("got.json", "w", encoding="utf-8") as f:
        json.dump({"kw": kw, "home": "$HOME", "tick": "` + "`echo hi`" + `", "sub": "$(echo x)"}, f, ensure_ascii=False)
`

// runScript executes the generated command for real: bash, then python.
func runScript(t *testing.T, cmd []string) map[string]any {
	t.Helper()
	python, err := exec.LookPath("python3")
	require.NoError(t, err, "these tests run the generated script with Python 3")
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.Mkdir(bin, 0o755))
	require.NoError(t, os.Symlink(python, filepath.Join(bin, "python")))
	c := exec.CommandContext(t.Context(), cmd[0], cmd[1:]...)
	c.Dir = dir
	c.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "HOME=/should-not-appear")
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	require.NoError(t, c.Run(), out.String())
	b, err := os.ReadFile(filepath.Join(dir, "got.json"))
	require.NoError(t, err, out.String())
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var got map[string]any
	require.NoError(t, dec.Decode(&got))
	return got
}

func TestScriptPassesArgsExactly(t *testing.T) {
	cases := map[string]string{
		"quotes":       `{"s": "it's \"quoted\" '' \"\""}`,
		"dollar":       `{"s": "$HOME ${PATH} $1 $$"}`,
		"backticks":    "{\"s\": \"`rm -rf /` $(echo pwned)\"}",
		"newlines":     `{"s": "line1\nline2\r\n\ttab\\n literal backslash-n"}`,
		"unicode":      `{"s": "héllo wörld 训练 🚀 \u2028 sep", "ключ": "значение"}`,
		"nested":       `{"cfg": {"opt": {"lr": 0.001, "betas": [0.9, 0.999]}, "layers": [1, [2, 3], {"a": null}]}}`,
		"python words": `{"t": true, "f": false, "n": null, "i": 3, "fl": 3.0, "neg": -2, "big": 123456789012345678901234567890}`,
		"heredoc ends": `{"s": "EOM\nTRAINSTEP_EOF\n"}`,
		"empty":        `{}`,
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			var fa step.Object
			require.NoError(t, json.Unmarshal([]byte(args), &fa))
			cmd, err := Script{Source: echoSource, FuncName: "check", FuncArgs: fa, Policy: runtimes.PolicyPlain}.Command()
			require.NoError(t, err)
			got := runScript(t, cmd)
			want, _ := json.Marshal(fa)
			gotKW, _ := json.Marshal(got["kw"])
			assert.JSONEq(t, string(want), string(gotKW))
			assert.Equal(t, "$HOME", got["home"], "the heredoc must not expand $")
			assert.Equal(t, "`echo hi`", got["tick"], "the heredoc must not run backticks")
			assert.Equal(t, "$(echo x)", got["sub"])
		})
	}
}

func TestScriptKeepsIntegerAndFloatApart(t *testing.T) {
	lit, err := PyLiteral(map[string]any{"i": json.Number("1"), "f": json.Number("1.0"), "e": json.Number("1e3")})
	require.NoError(t, err)
	assert.Equal(t, `{"e": 1e3, "f": 1.0, "i": 1}`, lit)
}

func TestScriptWithDelimiterInSource(t *testing.T) {
	src := echoSource + "\nX = '''\nTRAINSTEP_EOF\nEOM\n'''\n"
	cmd, err := Script{Source: src, FuncName: "check", Policy: runtimes.PolicyPlain}.Command()
	require.NoError(t, err)
	assert.Equal(t, "$HOME", runScript(t, cmd)["home"])
}

func TestScriptTooLargeForOneItemIsCompressed(t *testing.T) {
	// 200 KiB of comments: too big raw, small compressed.
	src := echoSource + strings.Repeat("# padding padding padding padding padding padding padding\n", 3500)
	cmd, err := Script{Source: src, FuncName: "check", FuncArgs: step.Object{{Key: "k", Value: "v"}}, Policy: runtimes.PolicyPlain}.Command()
	require.NoError(t, err)
	assert.LessOrEqual(t, len(cmd[2]), MaxCommandItem)
	assert.Contains(t, cmd[2], "zlib.decompress")
	assert.Equal(t, map[string]any{"k": "v"}, runScript(t, cmd)["kw"])
}

func TestScriptTooLargeEvenCompressedIsAClearError(t *testing.T) {
	// Random-looking text does not compress.
	var b strings.Builder
	x := uint64(88172645463325252)
	for b.Len() < 200*1024 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b.WriteString(strings.Repeat(string(rune('a'+x%26)), 1))
		if x%61 == 0 {
			b.WriteString("\n")
		}
	}
	s, err := step.Parse([]byte("framework: jax\ntrainer: {}"))
	require.NoError(t, err)
	s.Trainer.Fields, _ = json.Marshal(map[string]any{"func": "def f():\n    '''" + b.String() + "'''\n"})
	tr, errs := Builtin().Resolve(s)
	require.Empty(t, errs)
	_, errs = tr.Build(&jaxRT, nil)
	require.NotEmpty(t, errs)
	assert.Equal(t, "trainer.func", errs[0].Field)
	assert.Contains(t, errs[0].Error(), "over the 65536 the installed Trainer")
	assert.Contains(t, errs[0].Error(), "CustomTrainerContainer")
}

func TestScriptInstallsPackagesBeforeRunning(t *testing.T) {
	cmd, err := Script{Source: echoSource, FuncName: "check", Packages: []string{"numpy>=1.0", "a b"}, IndexURLs: []string{"https://x/simple", "https://y/simple"}, Policy: runtimes.PolicyTorch}.Command()
	require.NoError(t, err)
	s := cmd[2]
	assert.Contains(t, s, "PACKAGES=('numpy>=1.0' 'a b')")
	assert.Contains(t, s, "PIP_OPTS=(--index-url https://x/simple --extra-index-url https://y/simple)")
	assert.Less(t, strings.Index(s, "pip install"), strings.Index(s, "exec torchrun"))
	out, err := exec.CommandContext(t.Context(), "bash", "-n", "-c", s).CombinedOutput()
	require.NoError(t, err, "the script must be valid bash: %s", out)
}

func TestDedentAndFunctions(t *testing.T) {
	src := "    def a():\n        pass\n\n    async def b(x):\n        return x\n    class C:\n        def method(self): pass\n"
	assert.Equal(t, []string{"a", "b"}, TopLevelFunctions(dedent(src)))
}

// runResult executes the generated command with extra env and returns the exit error, the
// output and what was written to the result file (the termination message on a cluster).
func runResult(t *testing.T, src string, env ...string) (out, msg string, runErr error) {
	t.Helper()
	return runResultIn(t, 1, src, env...)
}

// runResultIn is runResult in a pod of containers containers.
func runResultIn(t *testing.T, containers int, src string, env ...string) (out, msg string, runErr error) {
	t.Helper()
	python, err := exec.LookPath("python3")
	require.NoError(t, err, "these tests run the generated script with Python 3")
	cmd, err := Script{Source: src, FuncName: "train", Policy: runtimes.PolicyPlain, Containers: containers}.Command()
	require.NoError(t, err)
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.Mkdir(bin, 0o755))
	require.NoError(t, os.Symlink(python, filepath.Join(bin, "python")))
	file := filepath.Join(dir, "termination-log")
	c := exec.CommandContext(t.Context(), cmd[0], cmd[1:]...)
	c.Dir = dir
	c.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), ResultFileEnv+"="+file, "RANK=", "OMPI_COMM_WORLD_RANK=", "PMI_RANK=", "JAX_PROCESS_ID=", "DMLC_TASK_ID=")
	c.Env = append(c.Env, env...)
	var buf bytes.Buffer
	c.Stdout, c.Stderr = &buf, &buf
	runErr = c.Run()
	b, _ := os.ReadFile(file)
	return buf.String(), string(b), runErr
}

func TestScriptWritesTheReturnValueOnRankZero(t *testing.T) {
	out, msg, err := runResult(t, "def train():\n    return {'accuracy': 0.93, 'model_uri': 's3://b/m', 'tags': ['a', 'é'], 'n': None}\n")
	require.NoError(t, err, out)
	assert.JSONEq(t, `{"`+ResultMarker+`": {"accuracy": 0.93, "model_uri": "s3://b/m", "tags": ["a", "é"], "n": null}}`, msg)

	for _, rank := range []string{"RANK=1", "OMPI_COMM_WORLD_RANK=3", "DMLC_TASK_ID=1", "JAX_PROCESS_ID=2"} {
		out, msg, err = runResult(t, "def train():\n    return 1\n", rank)
		require.NoError(t, err, out)
		assert.Empty(t, msg, "only rank 0 writes (%s)", rank)
	}
	out, msg, err = runResult(t, "def train():\n    return 7\n", "RANK=0")
	require.NoError(t, err, out)
	assert.JSONEq(t, `{"`+ResultMarker+`": 7}`, msg)

	out, msg, err = runResult(t, "def train():\n    print('no return')\n")
	require.NoError(t, err, out)
	assert.Empty(t, msg, "None writes nothing")
}

// A function offered a checkpoint has it written beside its result, for the face to report;
// one that returned None writes that alone.
func TestScriptWritesWhatItResumedFrom(t *testing.T) {
	root := t.TempDir()
	saved := filepath.Join(root, "step-40")
	require.NoError(t, os.Mkdir(saved, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(saved, CheckpointMarker), []byte("40\n"), 0o644))
	dir := step.CheckpointDirEnv + "=" + root
	out, msg, err := runResult(t, "def train():\n    return 7\n", dir)
	require.NoError(t, err, out)
	assert.JSONEq(t, `{"`+ResultMarker+`": 7, "`+ResumedFromMarker+`": "`+saved+`"}`, msg)

	out, msg, err = runResult(t, "def train():\n    pass\n", dir)
	require.NoError(t, err, out)
	assert.JSONEq(t, `{"`+ResumedFromMarker+`": "`+saved+`"}`, msg)

	out, msg, err = runResult(t, "def train():\n    return 7\n", dir, "RANK=1")
	require.NoError(t, err, out)
	assert.Empty(t, msg, "only rank 0 writes")

	out, msg, err = runResult(t, "def train():\n    return 7\n", step.CheckpointDirEnv+"="+t.TempDir(), step.ResumeFromEnv+"=/stale")
	require.NoError(t, err, out)
	assert.JSONEq(t, `{"`+ResultMarker+`": 7}`, msg, "no checkpoint saved: nothing resumed, whatever the env said before")
}

// numpyLike emulates what the script meets in ML code without needing numpy on the test
// machine, by the same protocol numpy, torch and jax objects offer: numpy.float64 is a float
// subclass; numpy.float32/int64/bool_ scalars and 0-d arrays have item() and tolist() giving a
// Python scalar; n-d arrays and tensors have tolist() giving nested lists.
const numpyLike = `
class float64(float):
    pass

class Scalar:
    def __init__(self, v):
        self.v = v
    def item(self):
        return self.v
    def tolist(self):
        return self.v

class Array:
    def __init__(self, rows):
        self.rows = rows
    def tolist(self):
        return [[Scalar(x).item() for x in r] for r in self.rows]

class Model:
    def __repr__(self):
        return "<Model resnet>"
`

// Every value that has a JSON form keeps it, one value at a time, so one odd value never costs
// the others their result-<key> output; what each becomes is logged on the node.
func TestScriptConvertsEachValueToJSON(t *testing.T) {
	out, msg, err := runResult(t, numpyLike+`
def train():
    return {
        "model_uri": "s3://b/m",
        "loss": float("nan"), "best": float("inf"), "worst": float64("-inf"), "lr": float64(0.5),
        "acc": Scalar(0.93), "steps": Scalar(1200), "ok": Scalar(True), "zero_d": Scalar(float("nan")),
        "w": Array([[1, 2], [3, 4]]),
        "shape": (2, 2), "tags": {"b", "a"}, "mixed": {1, "x"}, "name": b"resnet", "raw": b"\xff\x00",
        "model": Model(),
        "by_epoch": {1: 0.5, 2: 0.25}, "flags": {True: "on", None: "unset", 1.5: "half"},
        "nested": {"history": [float("nan"), 1.0]},
    }
`)
	require.NoError(t, err, out)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(msg), &got), msg)
	assert.Equal(t, map[string]any{
		"model_uri": "s3://b/m",
		"loss":      "NaN", "best": "Infinity", "worst": "-Infinity", "lr": 0.5,
		"acc": 0.93, "steps": 1200.0, "ok": true, "zero_d": "NaN",
		"w":     []any{[]any{1.0, 2.0}, []any{3.0, 4.0}},
		"shape": []any{2.0, 2.0}, "tags": []any{"a", "b"}, "name": "resnet", "raw": `b'\xff\x00'`,
		"model":    "<Model resnet>",
		"by_epoch": map[string]any{"1": 0.5, "2": 0.25}, "flags": map[string]any{"true": "on", "null": "unset", "1.5": "half"},
		"nested": map[string]any{"history": []any{"NaN", 1.0}},
	}, withoutKey(got[ResultMarker], "mixed"))
	assert.ElementsMatch(t, []any{1.0, "x"}, got[ResultMarker].(map[string]any)["mixed"], "an unsortable set keeps its iteration order")
	assert.Equal(t, []any{"raw", "model"}, got[UnconvertedMarker], "only what has no JSON form is listed")
	for _, line := range []string{
		`trainstep: result loss: NaN is written as the string "NaN" (JSON has no such number)`,
		`trainstep: result worst: -Infinity is written as the string "-Infinity"`,
		`trainstep: result nested.history[0]: NaN is written as the string "NaN"`,
		"trainstep: result tags: a set is written as a list",
		"trainstep: result raw has no JSON form; it is written as its repr() string",
		"trainstep: result model has no JSON form; it is written as its repr() string",
	} {
		assert.Contains(t, out, line)
	}

	// Not a dict: the value itself converts.
	out, msg, err = runResult(t, numpyLike+"def train():\n    return Scalar(float('nan'))\n")
	require.NoError(t, err, out)
	assert.JSONEq(t, `{"`+ResultMarker+`": "NaN"}`, msg)
	out, msg, err = runResult(t, "def train():\n    return {2, 1}\n")
	require.NoError(t, err, out)
	assert.JSONEq(t, `{"`+ResultMarker+`": [1, 2]}`, msg)
}

func withoutKey(v any, key string) map[string]any {
	m, _ := v.(map[string]any)
	out := map[string]any{}
	for k, x := range m {
		if k != key {
			out[k] = x
		}
	}
	return out
}

// Keys that become the same JSON string would silently keep the last value: the node fails
// naming both.
func TestScriptRefusesKeysThatCollideInJSON(t *testing.T) {
	for src, want := range map[string]string{
		"def train():\n    return {1: 'a', '1': 'b'}\n":            `the return value has the keys 1 and '1', which are both "1" in JSON; rename one of them`,
		"def train():\n    return {'m': {True: 1, 'true': 2}}\n":   `m has the keys True and 'true', which are both "true" in JSON`,
		"def train():\n    return {'m': [{None: 1, 'null': 2}]}\n": `m[0] has the keys None and 'null', which are both "null" in JSON`,
		"def train():\n    return {b'k': 1, 'k': 2}\n":             `the return value has the keys b'k' and 'k', which are both "k" in JSON`,
		"def train():\n    return {float('nan'): 1, 'NaN': 2}\n":   `the return value has the keys nan and 'NaN', which are both "NaN" in JSON`,
	} {
		out, msg, err := runResult(t, src)
		require.Error(t, err, "the node fails: %s", src)
		assert.Contains(t, out, want)
		assert.Empty(t, msg)
	}
}

func TestScriptFailsClearlyOnATooLargeReturnValue(t *testing.T) {
	out, msg, err := runResult(t, "def train():\n    return {'weights': [0.5] * 2000}\n")
	require.Error(t, err, "the node fails")
	assert.Contains(t, out, "over the 4096 this pod's termination message holds")
	assert.Contains(t, out, "return their URI")
	assert.Empty(t, msg)
	// Just under the limit fits.
	out, msg, err = runResult(t, "def train():\n    return 'x' * (4096 - len('{\"trainstep.dev/result\":\"\"}'))\n")
	require.NoError(t, err, out)
	assert.Len(t, msg, MaxResult)
}

// The kubelet keeps 12288 ÷ containers bytes of each termination message: a trainer pod of 3
// containers, plus room for a service mesh's 2, keeps 2457; the script refuses more by name.
func TestScriptKeepsToWhatTheKubeletKeepsOfThePod(t *testing.T) {
	assert.Equal(t, 4096, ResultLimit(0))
	assert.Equal(t, 4096, ResultLimit(1), "one container and a mesh's two: 12288 / 3")
	assert.Equal(t, 3072, ResultLimit(2))
	assert.Equal(t, 2457, ResultLimit(3))
	out, msg, err := runResultIn(t, 3, "def train():\n    return {'model_uri': 's3://b/m', 'notes': 'x' * 3000}\n")
	require.Error(t, err, "the node fails")
	assert.Contains(t, out, "over the 2457 this pod's termination message holds")
	assert.Contains(t, out, "3 planned + 2 for a service mesh's sidecars")
	assert.Empty(t, msg)
	out, msg, err = runResultIn(t, 3, "def train():\n    return 'x' * (2457 - len('{\"trainstep.dev/result\":\"\"}'))\n")
	require.NoError(t, err, out)
	assert.Len(t, msg, 2457)
}

func TestScriptKeepsToTheInstalledTrainersLimit(t *testing.T) {
	// 100 KiB: over v2.2's 64 KiB, under v2.3's 1 MiB and Linux's 128 KiB per argument.
	src := echoSource + strings.Repeat("# padding padding padding padding padding padding padding\n", 1750)
	cmd, err := Script{Source: src, FuncName: "check", Policy: runtimes.PolicyPlain, MaxItem: MaxCommandItemAny}.Command()
	require.NoError(t, err)
	assert.Greater(t, len(cmd[2]), MaxCommandItem)
	assert.NotContains(t, cmd[2], "zlib.decompress", "Trainer v2.3 takes 100 KiB as it is")
	assert.Equal(t, "$HOME", runScript(t, cmd)["home"], "and bash starts with it")
	cmd, err = Script{Source: src, FuncName: "check", Policy: runtimes.PolicyPlain, MaxItem: 65536}.Command()
	require.NoError(t, err)
	assert.Contains(t, cmd[2], "zlib.decompress", "v2.2: compressed")

	// 200 KiB passes v2.3's 1 MiB but not execve: compressed even there.
	src = echoSource + strings.Repeat("# padding padding padding padding padding padding padding\n", 3500)
	cmd, err = Script{Source: src, FuncName: "check", Policy: runtimes.PolicyPlain, MaxItem: MaxCommandItemAny}.Command()
	require.NoError(t, err)
	assert.Contains(t, cmd[2], "zlib.decompress")
	assert.LessOrEqual(t, len(cmd[2]), MaxExecArg)
	assert.Equal(t, "$HOME", runScript(t, cmd)["home"])
}

// Kubernetes' rule, run in real bash: envFrom overrides the image's ENV and what the shell set
// (HOSTNAME); only the container's own env wins; among sources the last wins; bash's read-only
// variables (UID) stay bash's without failing the script.
func TestEnvFromPreludeExportsTheMountedKeys(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "0"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "1"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "2"), 0o755))
	files := map[string]string{
		"0/TOKEN": "s3cr3t $HOME `x`\n", "0/bad-name": "skipped", "0/IMAGE": "from the secret", "0/OWN": "from the secret", "0/SHARED": "first source",
		"0/UID": "not bash's", "0/HOSTNAME": "from the secret",
		"1/REGION": "eu", "2/SHARED": "last source wins",
	}
	for f, v := range files {
		require.NoError(t, os.WriteFile(filepath.Join(root, f), []byte(v), 0o644))
	}
	require.NoError(t, os.Symlink(filepath.Join(root, "1", "REGION"), filepath.Join(root, "0", "..data")), "hidden entries are not keys")
	src := "def train():\n    import os, json\n    json.dump({k: os.environ.get(k) for k in ['TOKEN', 'IMAGE', 'OWN', 'AWS_REGION', 'bad-name', 'REGION', 'SHARED', 'HOSTNAME']}, open('got.json', 'w'))\n"
	cmd, err := Script{Source: src, FuncName: "train", Policy: runtimes.PolicyPlain}.Command()
	require.NoError(t, err)
	p := Parts{Command: cmd}
	require.True(t, PrependToScript(&p, EnvFromPrelude([]string{"", "AWS_", ""}, []string{"OWN", "JOB_COMPLETION_INDEX"})))
	python, err := exec.LookPath("python3")
	require.NoError(t, err)
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.Mkdir(bin, 0o755))
	require.NoError(t, os.Symlink(python, filepath.Join(bin, "python")))
	c := exec.CommandContext(t.Context(), p.Command[0], p.Command[1:]...)
	c.Dir = dir
	c.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), EnvFromDirEnv+"="+root, "IMAGE=from the image's ENV", "OWN=from the container's env", "HOSTNAME=pod-0", ResultFileEnv+"="+filepath.Join(dir, "r"))
	out, err := c.CombinedOutput()
	require.NoError(t, err, string(out))
	b, err := os.ReadFile(filepath.Join(dir, "got.json"))
	require.NoError(t, err)
	assert.JSONEq(t, `{"TOKEN": "s3cr3t $HOME `+"`x`"+`\n", "IMAGE": "from the secret", "OWN": "from the container's env", "AWS_REGION": "eu", "bad-name": null, "REGION": null, "SHARED": "last source wins", "HOSTNAME": "from the secret"}`, string(b))

	assert.False(t, PrependToScript(&Parts{Command: []string{"python", "train.py"}}, "x"), "only a bash -c script can export")
}
