package generate

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Disagreement is a version a file states outside the generated blocks that its source does not
// say: a claim written by hand that went stale, or was wrong when written.
type Disagreement struct {
	File string // from the repository root
	Line int
	// Says is the claim as the file words it; Want what the sources say instead.
	Says, Want string
}

func (d Disagreement) String() string {
	return fmt.Sprintf("%s:%d: %q, but %s: state it with a generated block (internal/generate/claimblocks.go) or fix it", d.File, d.Line, d.Says, d.Want)
}

// scanned says which files the scanner reads: the ones a user reads for what trainstep works
// with. docs/compatibility.md is generated whole; docs/testing.md and docs/benchmarks.md say what
// the test bed pins and what was measured on it, not what is supported.
func scanned(path string) bool {
	switch {
	case path == "docs/compatibility.md", path == "docs/testing.md", path == "docs/benchmarks.md":
		return false
	case path == "README.md", path == "CONTRIBUTING.md", path == "SECURITY.md":
		return true
	case strings.HasPrefix(path, "docs/"):
		return filepath.Ext(path) == ".md" && !strings.Contains(strings.TrimPrefix(path, "docs/"), "/")
	case strings.HasPrefix(path, "plugin/"):
		return filepath.Base(path) == "README.md"
	case strings.HasPrefix(path, "charts/"), strings.HasPrefix(path, "manifests/"), strings.HasPrefix(path, "examples/"):
		return slices.Contains([]string{".md", ".yaml", ".yml", ".tpl", ".txt"}, filepath.Ext(path))
	}
	return false
}

// Disagreements scans every file a user reads for versions of Argo, Tekton, Kubernetes, the
// Trainer, Kueue and trainstep itself stated outside generated blocks, and returns the ones
// that disagree with the claims' sources (LoadClaims), in file and line order.
func Disagreements(root string) ([]Disagreement, error) {
	c, err := LoadClaims(root)
	if err != nil {
		return nil, err
	}
	var out []Disagreement
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || slices.Contains([]string{"bin", "dist", "test", "core", "internal", "cmd", "hack"}, rel)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !scanned(rel) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		found, err := scanFile(rel, string(b), c)
		out = append(out, found...)
		return err
	})
	return out, err
}

// The forms a claim takes. A version is v3.6.12, 3.6.12, 1.33 or v2.2.
const ver = `v?\d+\.\d+(?:\.\d+)?`

var (
	// systemMention names a system a version nearby is about.
	systemMention = regexp.MustCompile(`(?i)\b(argo(?:\s+workflows)?|tekton(?:\s+pipelines)?|kubernetes|k8s|kube-apiserver|(?:kubeflow\s+)?trainer|jobset|kueue)\b`)
	minClaim      = regexp.MustCompile(`(?:>=|≥)\s*(` + ver + `)|\b(` + ver + `)\+|\b(` + ver + `)\s+(?:or later|or newer|and later|or above)`)
	majorClaim    = regexp.MustCompile(`\bv?(\d+)\.x\b`)
	rangeClaim    = regexp.MustCompile(`\b(` + ver + `)\s*(?:to|through|…|\.\.\.|–)\s*(` + ver + `)\b`)
	// "proved on" runs to the end of its clause: a ")", ";" or a full stop.
	provedClaim = regexp.MustCompile(`proved on ((?:[^);.]|\.\d)*)`)
	anyVersion  = regexp.MustCompile(`\b` + ver + `\b`)

	// Fields that state a version whatever the words around them.
	kubeVersionField = regexp.MustCompile(`kubeVersion:\s*["']?>=\s*(` + ver + `)`)
	tektonMinField   = regexp.MustCompile(`pipelines\.minVersion:\s*["']?(` + ver + `)`)
	argoPluginField  = regexp.MustCompile(`workflows\.argoproj\.io/version:\s*["']?>=\s*(` + ver + `)`)
	appVersionField  = regexp.MustCompile(`app\.kubernetes\.io/version:\s*["']?([^"'{\s]+)`)
	chartField       = regexp.MustCompile(`^version:\s*(\S+)`)
	// trainstep's own release, as a chart file, an image tag or a `make release`.
	releaseMention = regexp.MustCompile(`trainstep-(\d+\.\d+\.\d+)\.tgz|trainstep:(v\d+\.\d+\.\d+)|make release VERSION=(v\d+\.\d+\.\d+)`)
)

// scanFile is scan of one file: every line outside its generated blocks (and the README's
// compatibility block, which readme.go makes).
func scanFile(path, content string, c Claims) ([]Disagreement, error) {
	lines := strings.Split(content, "\n")
	blocks, err := parseBlocks(path, lines)
	if err != nil {
		return nil, err
	}
	generated := make([]bool, len(lines))
	for _, b := range blocks {
		for i := b.start; i <= b.end; i++ {
			generated[i] = true
		}
	}
	var out []Disagreement
	if len(blocks) > 0 && !slices.Contains(claimFiles, path) {
		out = append(out, Disagreement{File: path, Line: blocks[0].start + 1, Says: lines[blocks[0].start],
			Want: "make generate remakes only the blocks of the files in claimFiles (internal/generate/blocks.go)"})
	}
	inCompat := false
	for i, line := range lines {
		switch line + "\n" {
		case compatBegin:
			inCompat = true
		case compatEnd:
			inCompat = false
		}
		if generated[i] || inCompat {
			continue
		}
		prev := ""
		if i > 0 && !generated[i-1] {
			prev = lines[i-1]
		}
		for _, cl := range claimsOf(path, line, prev) {
			if want := c.check(cl); want != "" {
				out = append(out, Disagreement{File: path, Line: i + 1, Says: cl.says, Want: want})
			}
		}
	}
	return out, nil
}

// claim is one version statement found on a line.
type claim struct {
	system string // argo, tekton, kubernetes, trainer, kueue, jobset or trainstep
	kind   string // min, major, range, proved or exact
	vers   []string
	says   string
}

// claimsOf finds the claims on line; prev is the line before in the same file, whose last
// system mention a claim at the start of line may be about (prose wraps).
func claimsOf(path, line, prev string) []claim {
	var out []claim
	for _, f := range []struct {
		re     *regexp.Regexp
		system string
		kind   string
	}{
		{kubeVersionField, "kubernetes", "min"},
		{tektonMinField, "tekton", "min"},
		{argoPluginField, "argo", "min"},
	} {
		if m := f.re.FindStringSubmatch(line); m != nil {
			return []claim{{system: f.system, kind: f.kind, vers: []string{m[1]}, says: strings.TrimSpace(m[0])}}
		}
	}
	if m := appVersionField.FindStringSubmatch(line); m != nil {
		return []claim{{system: "trainstep", kind: "exact", vers: []string{m[1]}, says: strings.TrimSpace(m[0])}}
	}
	if filepath.Base(path) == "Chart.yaml" {
		if m := chartField.FindStringSubmatch(line); m != nil {
			return []claim{{system: "trainstep", kind: "exact", vers: []string{m[1]}, says: m[0]}}
		}
	}
	for _, m := range releaseMention.FindAllStringSubmatch(line, -1) {
		out = append(out, claim{system: "trainstep", kind: "exact", vers: []string{firstNonEmpty(m[1:])}, says: m[0]})
	}
	about := func(at int) string { return systemBefore(line[:at], prev) }
	for _, m := range rangeClaim.FindAllStringSubmatchIndex(line, -1) {
		out = append(out, claim{system: about(m[0]), kind: "range", vers: []string{line[m[2]:m[3]], line[m[4]:m[5]]}, says: line[m[0]:m[1]]})
	}
	for _, m := range minClaim.FindAllStringSubmatchIndex(line, -1) {
		for g := 2; g < len(m); g += 2 {
			if m[g] >= 0 {
				out = append(out, claim{system: about(m[0]), kind: "min", vers: []string{line[m[g]:m[g+1]]}, says: line[m[0]:m[1]]})
			}
		}
	}
	for _, m := range majorClaim.FindAllStringSubmatchIndex(line, -1) {
		out = append(out, claim{system: about(m[0]), kind: "major", vers: []string{line[m[2]:m[3]]}, says: line[m[0]:m[1]]})
	}
	for _, m := range provedClaim.FindAllStringSubmatchIndex(line, -1) {
		if vs := anyVersion.FindAllString(line[m[2]:m[3]], -1); len(vs) > 0 {
			// "proved on Kueue v0.17.0": the system may follow the words.
			sys := systemBefore(line[m[2]:m[3]], "")
			if sys == "" {
				sys = about(m[0])
			}
			out = append(out, claim{system: sys, kind: "proved", vers: vs, says: line[m[0]:m[1]]})
		}
	}
	return out
}

func firstNonEmpty(s []string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// systemBefore is the system the last mention in text names, else the last in prev; "" if
// neither names one.
func systemBefore(text, prev string) string {
	for _, t := range []string{text, prev} {
		ms := systemMention.FindAllStringIndex(t, -1)
		for i := len(ms) - 1; i >= 0; i-- {
			m := ms[i]
			// k8s.io and trainer.kubeflow.org are API groups, not a release.
			if strings.HasPrefix(t[m[1]:], ".io") || strings.HasPrefix(t[m[1]:], ".kubeflow.org") {
				continue
			}
			name := strings.ToLower(strings.Fields(t[m[0]:m[1]])[0])
			switch name {
			case "k8s", "kube-apiserver":
				name = "kubernetes"
			case "kubeflow":
				name = "trainer"
			}
			return name
		}
	}
	return ""
}

// check is what the sources say instead of cl, or "" when they agree.
func (c Claims) check(cl claim) string {
	norm := func(v string) string { return strings.TrimPrefix(v, "v") }
	switch cl.system {
	case "trainstep":
		if norm(cl.vers[0]) != norm(c.Release) {
			return "the release being prepared is " + c.Release + " (" + versionFile + ")"
		}
	case "kueue":
		for _, v := range cl.vers {
			if norm(v) != norm(c.Kueue) {
				return "the Kueue release proved is " + c.Kueue + " (" + kueueMake + ")"
			}
		}
	case "argo", "tekton":
		s := c.Argo
		if cl.system == "tekton" {
			s = c.Tekton
		}
		return checkSystem(cl, s, func(a, b string) bool { return norm(a) == norm(b) })
	case "kubernetes":
		return checkSystem(cl, c.Kubernetes, func(a, b string) bool { return minor(norm(a)) == minor(norm(b)) })
	case "trainer":
		// A Trainer feature may need a newer release than the oldest proved: a proved release,
		// or its minor (v2.2), is a feature's need (trainerFeatures says which).
		for _, v := range cl.vers {
			ok := provedMinor(c.Trainer, "v"+norm(v))
			switch cl.kind {
			case "major":
				ok = version(v)[0] == version(c.Trainer.Min())[0] && version(v)[0] == version(c.Trainer.Max())[0]
			case "proved":
				ok = slices.Contains(c.Trainer.Proved, "v"+norm(v))
			}
			if !ok {
				return "the Trainer releases proved are " + c.Trainer.List() + " (" + compatFile + ")"
			}
		}
	}
	return ""
}

// checkSystem checks a claim about a system whose "or later" is its oldest proved release.
func checkSystem(cl claim, s System, same func(a, b string) bool) string {
	proved := "the releases proved are " + s.List() + " (" + compatFile + ")"
	switch cl.kind {
	case "min":
		if !same(cl.vers[0], s.Min()) {
			return "the oldest release proved is " + s.Min() + " (" + compatFile + ")"
		}
	case "major":
		if version(s.Min())[0] != version(s.Max())[0] || version(cl.vers[0])[0] != version(s.Min())[0] {
			return proved
		}
	case "range":
		if !same(cl.vers[0], s.Min()) || !same(cl.vers[1], s.Max()) {
			return proved
		}
	case "proved":
		for _, v := range cl.vers {
			if !slices.ContainsFunc(s.Proved, func(p string) bool { return strings.TrimPrefix(p, "v") == strings.TrimPrefix(v, "v") }) {
				return proved
			}
		}
	}
	return ""
}
