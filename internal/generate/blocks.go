package generate

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// A generated block is text in a hand-written file that `make generate` makes from Claims, so a
// version is stated by one source, however many files state it. Markdown marks one with
//
//	<!-- generated: NAME ARGS -->
//	…made by the block NAME…
//	<!-- end: NAME -->
//
// and YAML (and Helm templates) with `# generated: NAME ARGS` … `# end: NAME`. A marker after other
// text on its line makes that one line instead: `version: 0.3.0 # generated: chart-version`.
// Lines of a block get the start marker's indentation. blockMakers below lists the blocks.

// claimFiles are the files with generated blocks; `make generate` rewrites their blocks and the
// scanner (scan.go) fails on a marker in a file not listed here.
var claimFiles = []string{
	"charts/trainstep/Chart.yaml",
	"charts/trainstep/README.md",
	"charts/trainstep/templates/argo-namespaces.yaml",
	"docs/install.md",
	"examples/steps/cached-step.yaml",
	"examples/steps/container-image.yaml",
	"examples/steps/finetune-llama-lora.yaml",
	"examples/steps/hello-xgboost.yaml",
	"examples/steps/queued-on-kueue.yaml",
	"examples/steps/resume-from-checkpoint.yaml",
	"examples/steps/retry-on-infrastructure.yaml",
	"examples/steps/secrets-envfrom.yaml",
	"examples/steps/torch-gpus.yaml",
	"examples/workflows/argo-container-step.yaml",
	"examples/workflows/argo-train-dag.yaml",
	"examples/workflows/tekton-train-pipeline.yaml",
	"examples/workflows/tekton-train-task.yaml",
	"manifests/argo/plugin.yaml",
	"manifests/tekton/kustomization.yaml",
	"plugin/argo/README.md",
	"plugin/tekton/README.md",
}

// block is one generated block or line found in a file.
type block struct {
	name string
	args []string
	// start and end are the indexes of its marker lines; a one-line block has start == end.
	start, end int
	indent     string
	// marker is the marker itself, for a one-line block (kept after the made text).
	marker string
}

func (b block) oneLine() bool { return b.start == b.end }

// markerSyntax is how a file's kind writes a comment around a marker.
type markerSyntax struct{ open, close string }

func syntaxOf(path string) markerSyntax {
	if strings.HasSuffix(path, ".md") {
		return markerSyntax{"<!-- ", " -->"}
	}
	return markerSyntax{"# ", ""}
}

var blockName = `([a-z][a-z0-9-]*)((?: [a-z0-9.-]+)*)`

// parseBlocks finds the blocks of a file's lines.
func parseBlocks(path string, lines []string) ([]block, error) {
	syn := syntaxOf(path)
	start := regexp.MustCompile(`^(\s*)(.*?)\s*(` + regexp.QuoteMeta(syn.open) + `generated: ` + blockName + regexp.QuoteMeta(syn.close) + `)\s*$`)
	var blocks []block
	for i := 0; i < len(lines); i++ {
		m := start.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		b := block{name: m[4], args: strings.Fields(m[5]), start: i, end: i, indent: m[1], marker: m[3]}
		if m[2] == "" {
			end := syn.open + "end: " + b.name + syn.close
			for b.end = i + 1; b.end < len(lines) && strings.TrimSpace(lines[b.end]) != end; b.end++ {
			}
			if b.end == len(lines) {
				return nil, fmt.Errorf("%s:%d: the generated block %q has no end line %q", path, i+1, b.name, end)
			}
		}
		blocks = append(blocks, b)
		i = b.end
	}
	return blocks, nil
}

// rewriteBlocks is content with every block made anew from c.
func rewriteBlocks(path string, content []byte, c Claims) ([]byte, error) {
	lines := strings.SplitAfter(string(content), "\n")
	blocks, err := parseBlocks(path, lines)
	if err != nil {
		return nil, err
	}
	var out strings.Builder
	next := 0
	for _, b := range blocks {
		mk, ok := blockMakers[b.name]
		if !ok {
			return nil, fmt.Errorf("%s:%d: no generated block is named %q (internal/generate/blocks.go lists them)", path, b.start+1, b.name)
		}
		text, err := mk(c, b.args)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: block %s: %w", path, b.start+1, b.name, err)
		}
		for _, l := range lines[next:b.start] {
			out.WriteString(l)
		}
		if b.oneLine() {
			if strings.Contains(text, "\n") {
				return nil, fmt.Errorf("%s:%d: block %s makes several lines: mark it with a start and an end line", path, b.start+1, b.name)
			}
			out.WriteString(b.indent + text + " " + b.marker + "\n")
			next = b.start + 1
			continue
		}
		out.WriteString(lines[b.start])
		for _, l := range strings.SplitAfter(strings.TrimSuffix(text, "\n")+"\n", "\n") {
			switch l {
			case "":
			case "\n":
				out.WriteString(l)
			default:
				out.WriteString(b.indent + l)
			}
		}
		next = b.end
	}
	for _, l := range lines[next:] {
		out.WriteString(l)
	}
	return []byte(out.String()), nil
}

// claimFile is the File that rewrites the blocks of path.
func claimFile(path string) File {
	return File{Path: path, Make: func(root string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			return nil, err
		}
		return withClaims(root, path, b)
	}}
}

// withClaims is content (the file path's) with its blocks made from root's claims.
func withClaims(root, path string, content []byte) ([]byte, error) {
	c, err := LoadClaims(root)
	if err != nil {
		return nil, err
	}
	if !bytes.Contains(content, []byte("generated: ")) {
		return nil, fmt.Errorf("%s has no generated block: drop it from claimFiles (internal/generate/blocks.go)", path)
	}
	return rewriteBlocks(path, content, c)
}
