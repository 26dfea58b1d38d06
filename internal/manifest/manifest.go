// Package manifest reads a YAML file of several documents (an example, an install file) as
// `kubectl apply -f` reads it: each document, in order, empty ones skipped.
package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/util/yaml"
)

// Document is one document of a file: its kind, and itself as JSON (ready for a strict decode
// into its Go type).
type Document struct {
	Kind string
	JSON []byte
}

// Documents reads every document of file.
func Documents(file string) ([]Document, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var docs []Document
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s, document %d: %w", file, len(docs)+1, err)
		}
		if doc == nil {
			continue
		}
		js, err := json.Marshal(doc)
		if err != nil {
			return nil, err
		}
		kind, _ := doc["kind"].(string)
		docs = append(docs, Document{Kind: kind, JSON: js})
	}
}
