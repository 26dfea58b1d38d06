// Package generate knows every file in the repository that is made by code rather than by hand,
// and how to make each one. `make generate` writes them; `make verify` and the tests fail when a
// committed copy is stale. One idiom for all of them, so a newcomer has one command to learn.
package generate

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"text/template"

	"github.com/argoproj/argo-workflows/v3/pkg/plugins/spec"
	plugins "github.com/argoproj/argo-workflows/v3/workflow/util/plugins"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/core/trainers"
	"github.com/trainstep/trainstep/internal/schema"
)

// File is one generated file: its path from the repository root and how to make its content.
type File struct {
	Path string
	// Make returns the content; root is the repository root, for generators that read inputs.
	Make func(root string) ([]byte, error)
}

// Files lists every generated file.
func Files() []File {
	return []File{
		{Path: "schemas/step.schema.json", Make: stepSchema},
		{Path: "manifests/argo/trainstep-executor-plugin-configmap.yaml", Make: argoPluginConfigMap},
		{Path: "manifests/argo/README.md", Make: argoPluginReadme},
		{Path: "README.md", Make: readmeCompatibility},
		{Path: "core/runtimes/stock/runtimes.yaml", Make: stockRuntimes},
	}
}

// Write regenerates every file under root and returns the paths it changed.
func Write(root string) ([]string, error) { return sync(root, true) }

// Stale lists the generated files whose committed content differs from what the code makes.
func Stale(root string) ([]string, error) { return sync(root, false) }

// sync compares each generated file with what its generator makes now, and with write rewrites
// the ones that differ. It returns the paths that differed.
func sync(root string, write bool) ([]string, error) {
	var differ []string
	for _, f := range Files() {
		want, err := f.Make(root)
		if err != nil {
			return differ, fmt.Errorf("generating %s: %w", f.Path, err)
		}
		path := filepath.Join(root, f.Path)
		if have, err := os.ReadFile(path); err == nil && bytes.Equal(have, want) {
			continue
		}
		if write {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return differ, err
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				return differ, fmt.Errorf("writing %s: %w", f.Path, err)
			}
		}
		differ = append(differ, f.Path)
	}
	return differ, nil
}

// stepSchema is the JSON Schema editors use for step files, derived from the Go types.
func stepSchema(string) ([]byte, error) {
	return schema.Marshal(schema.Step(trainers.Builtin()))
}

// The files `argo executor-plugin build manifests/argo` writes beside plugin.yaml, made here as
// Argo v3.7's command makes them (cmd/argo/commands/executorplugin/io.go: saveConfigMap,
// saveReadme), so that running it on manifests/argo changes nothing. plugin/argo's
// TestArgoBuildOfThePluginDirChangesNothing runs Argo's own command to prove it.
const (
	argoCodegenHeader  = "# This is an auto-generated file. DO NOT EDIT\n"
	argoReadmeTemplate = `<!-- This is an auto-generated file. DO NOT EDIT -->
# {{.Name}}

* Needs: {{index .Annotations "workflows.argoproj.io/version"}}
* Image: {{.Spec.Sidecar.Container.Image}}

{{index .Annotations "workflows.argoproj.io/description"}}

Install:

    kubectl apply -f {{.Name}}-executor-plugin-configmap.yaml

Uninstall:
	
    kubectl delete cm {{.Name}}-executor-plugin 
`
)

// argoPlugin reads manifests/argo/plugin.yaml as `argo executor-plugin build` does.
func argoPlugin(root string) (*spec.Plugin, error) {
	b, err := os.ReadFile(filepath.Join(root, "manifests", "argo", "plugin.yaml"))
	if err != nil {
		return nil, err
	}
	p := &spec.Plugin{}
	if err := yaml.UnmarshalStrict(b, p); err != nil {
		return nil, fmt.Errorf("plugin.yaml must parse strictly, as `argo executor-plugin build` does: %w", err)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("argo rejects plugin.yaml: %w", err)
	}
	return p, nil
}

// argoPluginConfigMap is the ConfigMap Argo's controller reads: Argo's own ToConfigMap of
// plugin.yaml.
func argoPluginConfigMap(root string) ([]byte, error) {
	p, err := argoPlugin(root)
	if err != nil {
		return nil, err
	}
	cm, err := plugins.ToConfigMap(p)
	if err != nil {
		return nil, fmt.Errorf("argo rejects the sidecar in plugin.yaml: %w", err)
	}
	out, err := yaml.Marshal(cm)
	if err != nil {
		return nil, err
	}
	return append([]byte(argoCodegenHeader), out...), nil
}

// argoPluginReadme is the plugin's README: what it needs, its image, how to install it.
func argoPluginReadme(root string) ([]byte, error) {
	p, err := argoPlugin(root)
	if err != nil {
		return nil, err
	}
	tmpl, err := template.New("readme").Parse(argoReadmeTemplate)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := tmpl.Execute(&b, p); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
