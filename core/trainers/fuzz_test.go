package trainers

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/core/step"
)

// literalEval answers, through one long-lived python3, what ast.literal_eval makes of a literal:
// each value tagged with its Python type, dicts as [key, value] pairs in order.
const literalEval = `
import ast, json, sys
def canon(v):
    if isinstance(v, bool): return {"bool": v}
    if isinstance(v, int): return {"int": str(v)}
    if isinstance(v, float): return {"float": repr(v)}
    if isinstance(v, str): return {"str": v}
    if v is None: return {"none": True}
    if isinstance(v, list): return {"list": [canon(x) for x in v]}
    if isinstance(v, dict): return {"dict": [[k, canon(x)] for k, x in v.items()]}
    return {"other": repr(type(v))}
for line in sys.stdin:
    try:
        out = {"ok": canon(ast.literal_eval(json.loads(line)))}
    except Exception as e:
        out = {"err": repr(e)}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
`

type pyEvaluator struct {
	mu  sync.Mutex
	in  io.Writer
	out *bufio.Reader
	err error
}

var (
	evalOnce  sync.Once
	evaluator pyEvaluator
)

// pyEval returns Python's view of a literal, or the exception literal_eval raised.
func pyEval(t *testing.T, lit string) (map[string]any, string) {
	t.Helper()
	evalOnce.Do(func() {
		cmd := exec.Command("python3", "-c", literalEval) // lives as long as the test process
		in, err := cmd.StdinPipe()
		if err != nil {
			evaluator.err = err
			return
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			evaluator.err = err
			return
		}
		evaluator.in, evaluator.out, evaluator.err = in, bufio.NewReader(out), cmd.Start()
	})
	require.NoError(t, evaluator.err, "these tests evaluate literals with python3")
	evaluator.mu.Lock()
	defer evaluator.mu.Unlock()
	q, _ := json.Marshal(lit)
	_, err := evaluator.in.Write(append(q, '\n'))
	require.NoError(t, err)
	line, err := evaluator.out.ReadString('\n')
	require.NoError(t, err)
	var r struct {
		OK  map[string]any `json:"ok"`
		Err string         `json:"err"`
	}
	require.NoError(t, json.Unmarshal([]byte(line), &r))
	return r.OK, r.Err
}

// FuzzPyLiteral: whatever JSON a step carries, the Python literal trainstep writes evaluates, in
// real Python, to the same value: same types (1 vs 1.0), same digits, same key order.
func FuzzPyLiteral(f *testing.F) {
	f.Fuzz(func(t *testing.T, doc string) {
		var args step.Object
		if err := json.Unmarshal([]byte(`{"v":`+doc+`}`), &args); err != nil {
			return // not JSON; the parser refuses it before PyLiteral sees it
		}
		lit, err := PyLiteral(args)
		if err != nil {
			require.Contains(t, err.Error(), "out of range for a 64-bit float", "the only refusal is a float Python would turn into inf")
			return
		}
		got, pyErr := pyEval(t, lit)
		require.Empty(t, pyErr, "Python rejects %s", lit)
		if err := sameValue(args, got); err != nil {
			t.Fatalf("%s\nliteral: %s\npython:  %v", err, lit, got)
		}
	})
}

// sameValue compares a decoded JSON value with Python's tagged view of it.
func sameValue(v any, py map[string]any) error {
	switch x := v.(type) {
	case nil:
		if _, ok := py["none"]; ok {
			return nil
		}
	case bool:
		if b, ok := py["bool"]; ok && b == x {
			return nil
		}
	case string:
		if s, ok := py["str"]; ok && s == x {
			return nil
		}
	case json.Number:
		s := x.String()
		if !strings.ContainsAny(s, ".eE") {
			want, _ := new(big.Int).SetString(s, 10)
			if i, ok := py["int"].(string); ok && i == want.String() {
				return nil
			}
			break
		}
		want, _ := strconv.ParseFloat(s, 64)
		if r, ok := py["float"].(string); ok {
			got, err := strconv.ParseFloat(r, 64)
			if err == nil && math.Float64bits(got) == math.Float64bits(want) {
				return nil
			}
		}
	case []any:
		l, ok := py["list"].([]any)
		if !ok || len(l) != len(x) {
			break
		}
		for i := range x {
			if err := sameValue(x[i], l[i].(map[string]any)); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
		return nil
	case step.Object:
		d, ok := py["dict"].([]any)
		if !ok || len(d) != len(x) {
			break
		}
		for i, m := range x {
			kv := d[i].([]any)
			if kv[0] != m.Key {
				return fmt.Errorf("key %d: Python has %q where the step has %q", i, kv[0], m.Key)
			}
			if err := sameValue(m.Value, kv[1].(map[string]any)); err != nil {
				return fmt.Errorf("%s: %w", m.Key, err)
			}
		}
		return nil
	}
	return fmt.Errorf("the step has %#v, Python has %v", v, py)
}
