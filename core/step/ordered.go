package step

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// EnvVar is one environment variable.
type EnvVar struct {
	Name  string
	Value string
}

// Env is environment variables written as a mapping (NAME: value), kept in dependency order
// (envorder.go): Kubernetes expands $(VAR) only from entries before it, so {FILE: $(ROOT)/x,
// ROOT: /data} reaches the pod as ROOT, then FILE, whatever order a face received it in. A set
// but empty Env is not nil.
type Env []EnvVar

// Get returns the value of name.
func (e Env) Get(name string) (string, bool) {
	for _, v := range e {
		if v.Name == name {
			return v.Value, true
		}
	}
	return "", false
}

// Has reports whether name is set.
func (e Env) Has(name string) bool {
	_, ok := e.Get(name)
	return ok
}

// UnmarshalJSON reads a mapping of strings, in the order it keeps them in (envorder.go).
func (e *Env) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		*e = nil
		return nil
	}
	var obj Object
	if err := obj.UnmarshalJSON(b); err != nil {
		return err
	}
	out := make(Env, 0, len(obj))
	for _, m := range obj {
		s, ok := m.Value.(string)
		if !ok {
			return &json.UnmarshalTypeError{Value: jsonKind(m.Value), Type: stringType, Field: m.Key}
		}
		out = append(out, EnvVar{Name: m.Key, Value: s})
	}
	*e = dependencyOrder(out)
	return nil
}

// MarshalJSON writes the mapping back in order.
func (e Env) MarshalJSON() ([]byte, error) {
	if e == nil {
		return []byte("null"), nil
	}
	obj := make(Object, len(e))
	for i, v := range e {
		obj[i] = Member{Key: v.Name, Value: v.Value}
	}
	return obj.MarshalJSON()
}

// Member is one key: value of an Object.
type Member struct {
	Key   string
	Value any
}

// Object is a JSON or YAML mapping in the user's order. Its values decode as nil, bool, string,
// json.Number (the literal text, so 2.0 stays a float and big integers stay exact), []any and,
// for nested mappings, Object.
type Object []Member

// Get returns the value of key.
func (o Object) Get(key string) (any, bool) {
	for _, m := range o {
		if m.Key == key {
			return m.Value, true
		}
	}
	return nil, false
}

// Set replaces the value of key where it is, or appends key.
func (o *Object) Set(key string, v any) {
	for i := range *o {
		if (*o)[i].Key == key {
			(*o)[i].Value = v
			return
		}
	}
	*o = append(*o, Member{Key: key, Value: v})
}

// UnmarshalJSON reads a mapping, keeping the order of its keys and the text of its numbers.
func (o *Object) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := orderedValue(dec)
	if err != nil {
		return err
	}
	switch x := v.(type) {
	case Object:
		*o = x
	case nil:
		*o = nil
	default:
		return &json.UnmarshalTypeError{Value: jsonKind(v), Type: objectType}
	}
	return nil
}

// MarshalJSON writes the mapping in order.
func (o Object) MarshalJSON() ([]byte, error) {
	if o == nil {
		return []byte("null"), nil
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(m.Key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(m.Value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func orderedValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			obj := Object{}
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key %v is not a string", kt)
				}
				if seen[k] {
					return nil, fmt.Errorf("key %q is set twice; keep one", k)
				}
				seen[k] = true
				v, err := orderedValue(dec)
				if err != nil {
					return nil, err
				}
				obj = append(obj, Member{Key: k, Value: v})
			}
			if _, err := dec.Token(); err != nil { // }
				return nil, err
			}
			return obj, nil
		case '[':
			arr := []any{}
			for dec.More() {
				v, err := orderedValue(dec)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := dec.Token(); err != nil { // ]
				return nil, err
			}
			return arr, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return tok, nil // nil, bool, string, json.Number
	}
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	}
	return "object"
}
