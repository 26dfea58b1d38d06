package trainers

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/trainstep/trainstep/core/step"
)

// PyLiteral renders a decoded JSON/YAML value as Python source that evaluates to the same value:
// True/False/None, integers stay integers of any size, floats stay floats (2.0, not 2), a
// step.Object becomes a dict in its order (a map[string]any in sorted order), strings are
// escaped so that quotes, backslashes, newlines and non-ASCII text reach the function exactly. The SDK relies on repr() of a Python
// dict; a Go port must not fall back to JSON spellings (true, null), which Python rejects.
func PyLiteral(v any) (string, error) {
	var b strings.Builder
	if err := writePy(&b, v); err != nil {
		return "", err
	}
	return b.String(), nil
}

// writePy writes one value: a scalar here, a container by its own writer.
func writePy(b *strings.Builder, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		if x {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case json.Number, float64, float32, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return writePyNumber(b, x)
	case string:
		writePyString(b, x)
	case step.Object:
		return writePyObject(b, x)
	case []any:
		return writePyList(b, x)
	case map[string]any:
		return writePyMap(b, x)
	default:
		return fmt.Errorf("cannot pass a %T to Python", v)
	}
	return nil
}

// writePyNumber writes a number as the kind it was written: a JSON literal as spelled, a Go
// float as a float, a Go integer as an int.
func writePyNumber(b *strings.Builder, v any) error {
	var s string
	var err error
	switch x := v.(type) {
	case json.Number:
		s, err = pyNumber(x.String())
	case float64:
		s, err = pyFloat(x)
	case float32:
		s, err = pyFloat(float64(x))
	default:
		s = fmt.Sprintf("%d", x)
	}
	if err != nil {
		return err
	}
	b.WriteString(s)
	return nil
}

// writePyObject writes a dict in the order the user wrote its keys, refusing a key set twice
// (Python would keep only the last, silently).
func writePyObject(b *strings.Builder, x step.Object) error {
	seen := make(map[string]bool, len(x))
	b.WriteByte('{')
	for i, m := range x {
		if seen[m.Key] {
			return fmt.Errorf("key %q is set twice; a Python dict keeps only the last", m.Key)
		}
		seen[m.Key] = true
		if i > 0 {
			b.WriteString(", ")
		}
		writePyString(b, m.Key)
		b.WriteString(": ")
		if err := writePy(b, m.Value); err != nil {
			return err
		}
	}
	b.WriteByte('}')
	return nil
}

// writePyList writes a list.
func writePyList(b *strings.Builder, x []any) error {
	b.WriteByte('[')
	for i, e := range x {
		if i > 0 {
			b.WriteString(", ")
		}
		if err := writePy(b, e); err != nil {
			return err
		}
	}
	b.WriteByte(']')
	return nil
}

// writePyMap writes a Go map as a dict in sorted key order: it has no order of its own, and the
// script must be the same for the same step.
func writePyMap(b *strings.Builder, x map[string]any) error {
	keys := make([]string, 0, len(x))
	for k := range x {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		writePyString(b, k)
		b.WriteString(": ")
		if err := writePy(b, x[k]); err != nil {
			return err
		}
	}
	b.WriteByte('}')
	return nil
}

var jsonNumber = regexp.MustCompile(`^-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?$`)

// pyNumber spells a JSON number for Python, keeping its kind: an integer literal stays an int of
// any size, a literal with a fraction or an exponent is a float (2.0 stays 2.0, -0.0 stays -0.0).
func pyNumber(s string) (string, error) {
	m := jsonNumber.FindStringSubmatch(s)
	if m == nil {
		return "", fmt.Errorf("%q is not a number", s)
	}
	if m[1] == "" && m[2] == "" {
		return s, nil // JSON integers have no leading zeros, so this is Python's too
	}
	if f, err := strconv.ParseFloat(s, 64); err != nil && math.IsInf(f, 0) {
		return "", fmt.Errorf("%s is out of range for a 64-bit float", s)
	}
	return s, nil
}

// pyFloat spells a Go float as a Python float literal (never as an int: 2.0, not 2).
func pyFloat(f float64) (string, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return "", fmt.Errorf("%v has no Python literal; pass it as a string and convert it with float()", f)
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s, nil
}

// writePyString writes a double-quoted Python str literal. Printable text, including non-ASCII,
// is kept as UTF-8 (Python 3 source is UTF-8); everything else is escaped.
func writePyString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			switch {
			case r < 0x20 || r == 0x7f:
				fmt.Fprintf(b, `\x%02x`, r)
			case r == 0x2028 || r == 0x2029 || (r >= 0x80 && r < 0xa0):
				fmt.Fprintf(b, `\u%04x`, r)
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}
