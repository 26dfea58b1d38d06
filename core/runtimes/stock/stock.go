// Package stock holds the runtimes of a stock Kubeflow Trainer install, for running a step where
// there is no cluster to discover them from.
package stock

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/trainstep/trainstep/core/runtimes"
)

//go:embed runtimes.yaml
var manifest []byte

// Source serves the stock runtimes; it is a runtimes.Source.
type Source struct{}

var _ runtimes.Source = Source{}

// List returns the stock runtimes; the namespace does not matter (they are cluster-scoped).
func (Source) List(context.Context, string) (runtimes.Catalog, error) {
	objs, err := Objects()
	if err != nil {
		return runtimes.Catalog{}, err
	}
	return runtimes.NewCatalog(objs), nil
}

// Objects decodes the stock runtime manifests.
func Objects() ([]unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	var out []unstructured.Unstructured
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("decoding the embedded stock runtimes: %w", err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}
