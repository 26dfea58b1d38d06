package trainers

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// PyLiteral renders a decoded JSON/YAML value as Python source that evaluates to the same value:
// True/False/None, integers stay integers, strings are escaped so that quotes, backslashes,
// newlines and non-ASCII text reach the function exactly. The SDK relies on repr() of a Python
// dict; a Go port must not fall back to JSON spellings (true, null), which Python rejects.
func PyLiteral(v any) (string, error) {
	var b strings.Builder
	if err := writePy(&b, v); err != nil {
		return "", err
	}
	return b.String(), nil
}

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
	case json.Number:
		s := x.String()
		if _, err := x.Float64(); err != nil && !strings.Contains(err.Error(), "range") {
			return fmt.Errorf("%q is not a number", s)
		}
		b.WriteString(s) // JSON number syntax is a subset of Python's
	case float64:
		fmt.Fprintf(b, "%v", x)
	case int, int32, int64:
		fmt.Fprintf(b, "%d", x)
	case string:
		writePyString(b, x)
	case []any:
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
	case map[string]any:
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
	default:
		return fmt.Errorf("cannot pass a %T to Python", v)
	}
	return nil
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
