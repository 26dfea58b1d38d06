package testenv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
)

// runtimeKinds are the documents installStockRuntimes creates; anything else in the runtimes
// directory (Kustomizations, future helper objects) is not a runtime and is skipped.
var runtimeKinds = map[string]bool{
	trainer.ClusterTrainingRuntimeKind: true,
	trainer.TrainingRuntimeKind:        true,
}

// installStockRuntimes creates every ClusterTrainingRuntime and TrainingRuntime found in the
// *.yaml files under dir, as the Trainer's own manifests ship them, and returns their names.
// They are created as unstructured objects so that fields the compiled-in API types do not
// know (another Trainer version) reach the server unchanged.
func installStockRuntimes(ctx context.Context, c client.Client, dir string) ([]string, error) {
	objs, err := readRuntimes(dir)
	if err != nil {
		return nil, err
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("no ClusterTrainingRuntime or TrainingRuntime found under %s", dir)
	}
	names := make([]string, 0, len(objs))
	for _, obj := range objs {
		if err := c.Create(ctx, obj); err != nil {
			return nil, fmt.Errorf("creating stock %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		names = append(names, obj.GetName())
	}
	return names, nil
}

// readRuntimes reads the runtimes a stock install applies: it follows dir's kustomization.yaml
// resources (so optional runtimes, such as v2.3's data-cache overlay, are left out as
// `kubectl apply -k` would leave them out), and falls back to every *.yaml file of a directory
// that has no kustomization.
func readRuntimes(dir string) ([]*unstructured.Unstructured, error) {
	objs, err := readKustomized(dir)
	if err != nil {
		return nil, fmt.Errorf("reading stock runtimes from %s: %w", dir, err)
	}
	return objs, nil
}

func readKustomized(dir string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if errors.Is(err, fs.ErrNotExist) {
		return readDir(dir)
	}
	if err != nil {
		return nil, err
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("%s/kustomization.yaml: %w", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range k.Resources {
		path := filepath.Join(dir, r)
		info, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("%s/kustomization.yaml names %s: %w", dir, r, err)
		}
		var found []*unstructured.Unstructured
		if info.IsDir() {
			found, err = readKustomized(path)
		} else {
			found, err = readRuntimeFile(path)
		}
		if err != nil {
			return nil, err
		}
		objs = append(objs, found...)
	}
	return objs, nil
}

func readDir(dir string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || filepath.Ext(path) != ".yaml" || d.Name() == "kustomization.yaml" {
			return nil
		}
		found, err := readRuntimeFile(path)
		if err != nil {
			return err
		}
		objs = append(objs, found...)
		return nil
	})
	return objs, err
}

// readRuntimeFile splits a possibly multi-document YAML file and keeps the runtime documents.
// A document holding only comments (the licence header before a "---") decodes to nothing.
func readRuntimeFile(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 1; ; i++ {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		var fields map[string]any
		if err := yaml.Unmarshal(doc, &fields); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		obj := &unstructured.Unstructured{Object: fields}
		if fields == nil || !isRuntime(obj) {
			continue
		}
		if obj.GetKind() == trainer.TrainingRuntimeKind && obj.GetNamespace() == "" {
			obj.SetNamespace(metav1.NamespaceDefault) // where kubectl apply would put it
		}
		objs = append(objs, obj)
	}
}

func isRuntime(obj *unstructured.Unstructured) bool {
	group, _, _ := strings.Cut(obj.GetAPIVersion(), "/")
	return group == trainer.GroupVersion.Group && runtimeKinds[obj.GetKind()]
}
