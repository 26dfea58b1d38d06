// Package docs_test holds the repository's documents to what the repository has: a link or a
// cited document that is not there sends a reader nowhere.
package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const root = "../.."

var (
	mdLink  = regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	code    = regexp.MustCompile("(?s)```.*?```|`[^`\n]*`")
	citedMD = regexp.MustCompile(`\b([A-Za-z0-9_./-]+\.md)\b`)
)

// files lists the repository's files with one of the suffixes, skipping .git and test data.
func files(t *testing.T, suffixes ...string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		for _, s := range suffixes {
			if !d.IsDir() && strings.HasSuffix(p, s) {
				out = append(out, p)
			}
		}
		return nil
	}))
	return out
}

// Every relative link in a Markdown file names a file or folder of the repository.
func TestMarkdownLinksResolve(t *testing.T) {
	docs := files(t, ".md")
	require.NotEmpty(t, docs)
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		require.NoError(t, err)
		for _, m := range mdLink.FindAllStringSubmatch(code.ReplaceAllString(string(b), ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			_, err := os.Stat(filepath.Join(filepath.Dir(doc), target))
			assert.NoError(t, err, "%s links to %s", doc, target)
		}
	}
}

// Every Markdown document that a script, a Makefile or a Go file cites by name is in the
// repository (a citation of a document that lives elsewhere is no help to the reader).
func TestCitedDocumentsExist(t *testing.T) {
	have := map[string]bool{}
	for _, doc := range files(t, ".md") {
		have[filepath.Base(doc)] = true
	}
	for _, src := range files(t, ".sh", ".mk", "Makefile", ".go") {
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		for _, m := range citedMD.FindAllStringSubmatch(string(b), -1) {
			assert.True(t, have[filepath.Base(m[1])], "%s cites %s, which is not in the repository", src, m[1])
		}
	}
}

// readme is the repository's README.md.
func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	return string(b)
}

// The README is read in ten minutes: the reference lives in docs/, and the README stays short.
func TestREADMEIsShort(t *testing.T) {
	const maxLines = 210
	lines := strings.Count(readme(t), "\n")
	assert.LessOrEqual(t, lines, maxLines, "README.md has %d lines; move reference material into docs/ and link it", lines)
}

// The README's quick start is two commands: a local run of a step (no cluster) and every test.
// Its code blocks hold exactly these, so a newcomer copies nothing else.
func TestREADMEQuickStartIsTheTwoCommands(t *testing.T) {
	_, rest, ok := strings.Cut(readme(t), "\n## Quick start\n")
	require.True(t, ok, "README.md has no \"## Quick start\" section")
	section, _, _ := strings.Cut(rest, "\n## ")
	var commands []string
	for _, block := range regexp.MustCompile("(?s)```[a-z]*\n(.*?)```").FindAllStringSubmatch(section, -1) {
		for _, line := range strings.Split(block[1], "\n") {
			if cmd, _, _ := strings.Cut(line, "#"); strings.TrimSpace(cmd) != "" {
				commands = append(commands, strings.TrimSpace(cmd))
			}
		}
	}
	assert.Equal(t, []string{
		"go run ./cmd/executor run --local -f examples/steps/hello-xgboost.yaml",
		"make test",
	}, commands)
}
