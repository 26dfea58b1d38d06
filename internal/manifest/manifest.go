// Package manifest reads a YAML file of several documents (an example, an install file) as
// `kubectl apply -f` reads it: each document, in order, empty ones skipped; and applies them as
// kubectl does.
package manifest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// Objects reads every document of file as an object.
func Objects(file string) ([]*unstructured.Unstructured, error) {
	docs, err := Documents(file)
	if err != nil {
		return nil, err
	}
	objs := make([]*unstructured.Unstructured, 0, len(docs))
	for i, d := range docs {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(d.JSON); err != nil {
			return nil, fmt.Errorf("%s, document %d: %w", file, i+1, err)
		}
		objs = append(objs, u)
	}
	return objs, nil
}

// Apply does what `kubectl apply --server-side -n namespace` does with objs: each one applied
// as the field manager kubectl, in namespace unless it is cluster-scoped ("" keeps each
// object's own namespace). It returns the cluster-scoped ones it applied, for a caller that
// removes them afterwards.
func Apply(ctx context.Context, c client.Client, objs []*unstructured.Unstructured, namespace string) (clusterScoped []*unstructured.Unstructured, err error) {
	for _, u := range objs {
		namespaced, err := c.IsObjectNamespaced(u)
		if err != nil {
			return clusterScoped, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
		}
		switch {
		case !namespaced:
			clusterScoped = append(clusterScoped, u)
		case namespace != "":
			u.SetNamespace(namespace)
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("kubectl"), client.ForceOwnership); err != nil {
			return clusterScoped, fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return clusterScoped, nil
}
