package step

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxJSON bounds what a step may expand to; YAML aliases can otherwise turn a few lines into
// gigabytes ("billion laughs"). maxDepth bounds nesting, as encoding/json does.
const (
	maxJSON  = 8 << 20
	maxDepth = 1000
)

var (
	yamlFloat   = regexp.MustCompile(`^([-+]?)(\d*)(?:\.(\d*))?(?:[eE]([-+]?\d+))?$`)
	yamlLineErr = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
)

// YAMLToJSON is the conversion Parse starts with, for faces that assemble a step from YAML
// pieces: keys in order, numbers as written. Bad input is an InvalidError.
func YAMLToJSON(data []byte) ([]byte, error) {
	js, errs := toJSON(data)
	return js, Invalid(errs)
}

// toJSON turns a step written in YAML or JSON into JSON that keeps what the user wrote: keys in
// their order, numbers as their literal text (so 2.0 stays a float and a 30-digit integer stays
// exact). Duplicate keys, infinities, NaN and syntax errors are refused on the user's path, with
// the line.
func toJSON(data []byte) ([]byte, field.ErrorList) {
	if json.Valid(data) {
		if errs := jsonDuplicates(data); len(errs) > 0 {
			return nil, errs
		}
		var b bytes.Buffer
		if err := json.Compact(&b, data); err != nil {
			return nil, field.ErrorList{field.Invalid(nil, "", "not valid JSON: "+err.Error())}
		}
		return b.Bytes(), nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return []byte("null"), nil
		}
		return nil, field.ErrorList{syntaxError(data, err)}
	}
	for {
		var next yaml.Node
		err := dec.Decode(&next)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, field.ErrorList{syntaxError(data, err)}
		}
		if c := next.Content; len(c) > 0 && (c[0].ShortTag() != "!!null" || c[0].Value != "") {
			return nil, field.ErrorList{field.Invalid(nil, "---", fmt.Sprintf("line %d: a second YAML document; a file holds one step, so remove the --- and what follows", next.Line))}
		}
	}
	w := &jsonWriter{active: map[*yaml.Node]bool{}}
	w.node(&doc, nil)
	if len(w.errs) > 0 {
		return nil, w.errs
	}
	return w.b.Bytes(), nil
}

// syntaxError names the line of a YAML syntax error and the key it is under.
func syntaxError(data []byte, err error) *field.Error {
	// yaml.v3 leaves the line out when it is the first, and reports a parser error's line 0-based.
	line, msg := 1, strings.TrimPrefix(err.Error(), "yaml: ")
	if m := yamlLineErr.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
		if strings.HasPrefix(msg, "did not find expected") {
			line++
		}
	}
	lines := strings.Split(string(data), "\n")
	text := ""
	if line >= 1 && line <= len(lines) {
		text = strings.TrimSpace(lines[line-1])
	}
	if len(text) > 80 {
		text = text[:77] + "..."
	}
	fix := "check the quoting, brackets and indentation there and on the line before"
	if line >= 1 && line <= len(lines) && strings.Contains(lines[line-1], "\t") {
		fix = "YAML indents with spaces, not tabs"
	}
	return field.Invalid(keyPathAt(lines, line), text, fmt.Sprintf("line %d: not valid YAML or JSON (%s); %s", line, msg, fix))
}

var keyLine = regexp.MustCompile(`^(\s*)(?:-\s+)?["']?([A-Za-z0-9_.$/-]+)["']?\s*:(\s|$)`)

// keyPathAt is the path of the keys a line sits under, judged by indentation; good enough to say
// where a syntax error is when the parser could not build the tree.
func keyPathAt(lines []string, line int) *field.Path {
	type key struct {
		indent int
		name   string
	}
	var stack []key
	for i := 0; i < line && i < len(lines); i++ {
		m := keyLine.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		indent := len(m[1])
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		stack = append(stack, key{indent, m[2]})
	}
	var p *field.Path
	for _, k := range stack {
		if p == nil {
			p = field.NewPath(k.name)
		} else {
			p = p.Child(k.name)
		}
	}
	return p
}

type jsonWriter struct {
	b      bytes.Buffer
	errs   field.ErrorList
	depth  int
	active map[*yaml.Node]bool // anchors being expanded: an alias to one of them is a cycle
}

func (w *jsonWriter) fail(p *field.Path, value any, n *yaml.Node, detail string) {
	w.errs = append(w.errs, field.Invalid(p, value, fmt.Sprintf("line %d: %s", n.Line, detail)))
	w.b.WriteString("null")
}

func (w *jsonWriter) node(n *yaml.Node, p *field.Path) {
	if w.b.Len() > maxJSON || w.depth > maxDepth {
		if len(w.errs) == 0 {
			w.fail(p, "", n, fmt.Sprintf("the step expands to more than %d bytes or %d levels (YAML aliases?); write it out", maxJSON, maxDepth))
		}
		return
	}
	w.depth++
	defer func() { w.depth-- }()
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			w.b.WriteString("null")
			return
		}
		w.node(n.Content[0], p)
	case yaml.AliasNode:
		if w.active[n.Alias] {
			w.fail(p, "*"+n.Value, n, "the alias refers to a value that contains it; YAML cannot nest a value in itself")
			return
		}
		w.active[n.Alias] = true
		w.node(n.Alias, p)
		delete(w.active, n.Alias)
	case yaml.SequenceNode:
		w.b.WriteByte('[')
		for i, e := range n.Content {
			if i > 0 {
				w.b.WriteByte(',')
			}
			w.node(e, p.Index(i))
		}
		w.b.WriteByte(']')
	case yaml.MappingNode:
		w.mapping(n, p)
	case yaml.ScalarNode:
		w.scalar(n, p)
	default:
		w.fail(p, "", n, "not a YAML value")
	}
}

type member struct {
	key   *yaml.Node
	value *yaml.Node
}

// mapping writes an object in the user's order. Keys merged with << come after the explicit ones
// and never override them.
func (w *jsonWriter) mapping(n *yaml.Node, p *field.Path) {
	var own, merged []member
	first := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merged = append(merged, w.mergeSources(v, p)...)
			continue
		}
		if k.Kind == yaml.AliasNode {
			k = k.Alias
		}
		if k.Kind != yaml.ScalarNode {
			w.errs = append(w.errs, field.Invalid(p, "", fmt.Sprintf("line %d: a key must be a plain name, not a list or an object", k.Line)))
			continue
		}
		if line, dup := first[k.Value]; dup {
			w.errs = append(w.errs, field.Invalid(child(p, k.Value), k.Value,
				fmt.Sprintf("line %d: already set on line %d; keep one", k.Line, line)))
			continue
		}
		first[k.Value] = k.Line
		own = append(own, member{k, v})
	}
	for _, m := range merged {
		if _, set := first[m.key.Value]; !set {
			first[m.key.Value] = m.key.Line
			own = append(own, m)
		}
	}
	w.b.WriteByte('{')
	for i, m := range own {
		if i > 0 {
			w.b.WriteByte(',')
		}
		key, _ := json.Marshal(m.key.Value)
		w.b.Write(key)
		w.b.WriteByte(':')
		w.node(m.value, child(p, m.key.Value))
	}
	w.b.WriteByte('}')
}

// mergeSources lists the members a << merge key brings: one mapping, or a list of them (earlier
// ones win).
func (w *jsonWriter) mergeSources(v *yaml.Node, p *field.Path) []member {
	for v.Kind == yaml.AliasNode {
		if w.active[v.Alias] {
			w.errs = append(w.errs, field.Invalid(child(p, "<<"), "*"+v.Value, fmt.Sprintf("line %d: the merge refers to a mapping that contains it", v.Line)))
			return nil
		}
		v = v.Alias
	}
	if w.active[v] {
		return nil
	}
	w.active[v] = true
	defer delete(w.active, v)
	var out []member
	switch v.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(v.Content); i += 2 {
			k := v.Content[i]
			if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
				out = append(out, w.mergeSources(v.Content[i+1], p)...)
				continue
			}
			if k.Kind == yaml.ScalarNode {
				out = append(out, member{k, v.Content[i+1]})
			}
		}
	case yaml.SequenceNode:
		for _, e := range v.Content {
			out = append(out, w.mergeSources(e, p)...)
		}
	default:
		w.errs = append(w.errs, field.Invalid(child(p, "<<"), v.Value, fmt.Sprintf("line %d: << merges a mapping (or a list of them), such as <<: *defaults", v.Line)))
	}
	return out
}

func child(p *field.Path, key string) *field.Path {
	if p == nil {
		return field.NewPath(key)
	}
	return p.Child(key)
}

func (w *jsonWriter) scalar(n *yaml.Node, p *field.Path) {
	plain := n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0
	switch n.ShortTag() {
	case "!!null":
		w.b.WriteString("null")
	case "!!bool":
		v, err := strconv.ParseBool(strings.ToLower(n.Value))
		if err != nil {
			w.fail(p, n.Value, n, "must be true or false")
			return
		}
		w.b.WriteString(strconv.FormatBool(v))
	case "!!int":
		i, ok := new(big.Int).SetString(strings.ReplaceAll(n.Value, "_", ""), 0)
		if !ok {
			w.fail(p, n.Value, n, "is not a whole number; quote it to pass a string")
			return
		}
		w.b.WriteString(i.String())
	case "!!float":
		text, err := jsonNumber(n.Value, n.Style&yaml.TaggedStyle != 0)
		if err != nil {
			w.fail(p, n.Value, n, err.Error())
			return
		}
		w.b.WriteString(text)
	default:
		if plain && n.ShortTag() == "!!str" && yamlFloat.MatchString(strings.ReplaceAll(n.Value, "_", "")) && strings.ContainsAny(n.Value, "0123456789") {
			w.fail(p, n.Value, n, "is out of range for a 64-bit float; quote it to pass a string")
			return
		}
		s, _ := json.Marshal(n.Value) // strings, timestamps and binary stay as written
		w.b.Write(s)
	}
}

// jsonNumber spells a YAML float as a JSON number with the same value and kind: an integer
// literal too large for int64 (YAML calls it a float) stays an integer, unless tagged !!float.
func jsonNumber(text string, tagged bool) (string, error) {
	m := yamlFloat.FindStringSubmatch(strings.ReplaceAll(text, "_", ""))
	if len(m) < 5 || (m[2] == "" && m[3] == "") {
		switch strings.ToLower(strings.TrimLeft(text, "+-")) {
		case ".inf", ".nan":
			return "", errors.New(`infinity and NaN have no JSON form, so they cannot be passed on; quote it (".inf") and convert it in Python with float()`)
		}
		return "", errors.New("is not a number; quote it to pass a string")
	}
	sign, whole, frac, exp := m[1], strings.TrimLeft(m[2], "0"), m[3], m[4]
	if sign == "+" {
		sign = ""
	}
	if whole == "" {
		whole = "0"
	}
	isInt := !strings.Contains(text, ".") && exp == ""
	if isInt && !tagged {
		if whole == "0" {
			return "0", nil // -0 is 0 for an integer
		}
		return sign + whole, nil
	}
	if frac == "" {
		frac = "0"
	}
	out := sign + whole + "." + frac
	if exp != "" {
		out += "e" + exp
	}
	if _, err := strconv.ParseFloat(out, 64); err != nil {
		return "", errors.New("is out of range for a 64-bit float; quote it to pass a string")
	}
	return out, nil
}

// jsonDuplicates reports keys set twice in one JSON object, which encoding/json would silently
// resolve to the last.
func jsonDuplicates(data []byte) field.ErrorList {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		path   *field.Path
		isObj  bool
		seen   map[string]int
		key    string
		expect bool // the next string token is a key
		index  int
	}
	var (
		stack []*frame
		errs  field.ErrorList
	)
	lineAt := func(off int64) int { return bytes.Count(data[:off], []byte("\n")) + 1 }
	// valuePath is the path of the value about to be read in the top frame.
	valuePath := func() *field.Path {
		if len(stack) == 0 {
			return nil
		}
		f := stack[len(stack)-1]
		if f.isObj {
			return child(f.path, f.key)
		}
		return f.path.Index(f.index)
	}
	afterValue := func() {
		if len(stack) == 0 {
			return
		}
		f := stack[len(stack)-1]
		if f.isObj {
			f.expect = true
		} else {
			f.index++
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return errs // the input is valid JSON; io.EOF
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				stack = append(stack, &frame{path: valuePath(), isObj: t == '{', seen: map[string]int{}, expect: t == '{'})
			default:
				stack = stack[:len(stack)-1]
				afterValue()
			}
		case string:
			if len(stack) > 0 && stack[len(stack)-1].isObj && stack[len(stack)-1].expect {
				f := stack[len(stack)-1]
				line := lineAt(dec.InputOffset())
				if first, dup := f.seen[t]; dup {
					errs = append(errs, field.Invalid(child(f.path, t), t, fmt.Sprintf("line %d: already set on line %d; keep one", line, first)))
				} else {
					f.seen[t] = line
				}
				f.key, f.expect = t, false
				continue
			}
			afterValue()
		default:
			afterValue()
		}
	}
}
