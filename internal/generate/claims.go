package generate

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/trainstep/trainstep/internal/compat"
)

// Claims are the versions the repository states anywhere, each from one source: trainstep's own
// release from the file VERSION, and what it works with from docs/compatibility.json (what `make
// test-compat` proved) and the pins `make test` proves (Kueue's in hack/make/kueue.mk, crane's
// module in go.mod). Generated blocks (blocks.go) are made from them, and the scanner (scan.go)
// fails on a hand-written claim that states another.
type Claims struct {
	// Release is the release being prepared, vMAJOR.MINOR.PATCH: the chart's version, the Tekton
	// Task's app.kubernetes.io/version and every `make release` the docs show.
	Release    string
	Argo       System
	Tekton     System
	Kubernetes System
	Trainer    System
	// Kueue is the Kueue release the real stack's Kueue suites run (make test): the one proved.
	Kueue string
	// Crane is the go-containerregistry module trainstep's image code is built with: the crane
	// the docs install pushes what that code writes.
	Crane string
}

// System is what the compatibility matrix proved of one system.
type System struct {
	// Proved are the releases whose last run passed every case, oldest first.
	Proved []string
}

// Min is the oldest release proved: the one "or later" claims name.
func (s System) Min() string { return s.Proved[0] }

// Max is the newest release proved.
func (s System) Max() string { return s.Proved[len(s.Proved)-1] }

// MinMinor is Min as MAJOR.MINOR, how Kubernetes versions are claimed (a patch release of a
// proved minor changes no API).
func (s System) MinMinor() string { return minor(s.Min()) }

// List is the releases proved, "a, b and c".
func (s System) List() string { return andList(s.Proved) }

// ChartVersion is Release as Helm's SemVer: without the v.
func (c Claims) ChartVersion() string { return strings.TrimPrefix(c.Release, "v") }

// The sources of the claims, from the repository root.
const (
	versionFile = "VERSION"
	compatFile  = "docs/compatibility.json"
	kueueMake   = "hack/make/kueue.mk"
)

var (
	releaseVersion = regexp.MustCompile(`^v\d+\.\d+\.\d+$`)
	kueuePin       = regexp.MustCompile(`(?m)^KUEUE_VERSION \?= (v\S+)$`)
	cranePin       = regexp.MustCompile(`(?m)^\s*github\.com/google/go-containerregistry (v\S+)`)
)

// LoadClaims reads every source of the claims under root.
func LoadClaims(root string) (Claims, error) {
	var c Claims
	b, err := os.ReadFile(filepath.Join(root, versionFile))
	if err != nil {
		return c, fmt.Errorf("the release version: %w", err)
	}
	c.Release = strings.TrimSpace(string(b))
	if !releaseVersion.MatchString(c.Release) {
		return c, fmt.Errorf("%s says %q: write the release being prepared as vMAJOR.MINOR.PATCH, e.g. v0.3.0", versionFile, c.Release)
	}
	rows, err := compat.Load(filepath.Join(root, compatFile))
	if err != nil {
		return c, err
	}
	for _, s := range []struct {
		system string
		into   *System
	}{{"argo", &c.Argo}, {"tekton", &c.Tekton}, {"k8s", &c.Kubernetes}, {"trainer", &c.Trainer}} {
		for _, r := range rows {
			if r.System == s.system && r.Status == "pass" {
				s.into.Proved = append(s.into.Proved, r.Version)
			}
		}
		if len(s.into.Proved) == 0 {
			return c, fmt.Errorf("%s proves no release of %s: nothing to claim; run `make test-compat ROWS=%s`", compatFile, s.system, s.system)
		}
		slices.SortFunc(s.into.Proved, compareVersions)
	}
	if c.Kueue, err = pin(root, kueueMake, kueuePin); err != nil {
		return c, err
	}
	if c.Crane, err = pin(root, "go.mod", cranePin); err != nil {
		return c, err
	}
	return c, nil
}

func pin(root, file string, re *regexp.Regexp) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		return "", err
	}
	m := re.FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("%s has no line matching %s: the version claims read it from there", file, re)
	}
	return string(m[1]), nil
}

// version is a release's numbers: v3.6.12 and 3.6.12 are {3, 6, 12}; 1.33 is {1, 33}.
func version(s string) []int {
	var n []int
	for _, p := range strings.Split(strings.TrimPrefix(s, "v"), ".") {
		i, err := strconv.Atoi(p)
		if err != nil {
			return n
		}
		n = append(n, i)
	}
	return n
}

// compareVersions orders releases by their numbers (the matrix lists them in its own order).
func compareVersions(a, b string) int { return slices.Compare(version(a), version(b)) }

// minor is MAJOR.MINOR of a release, keeping its v if it has one.
func minor(s string) string {
	parts := strings.SplitN(s, ".", 3)
	if len(parts) < 2 {
		return s
	}
	return parts[0] + "." + parts[1]
}

// andList is "a", "a and b", "a, b and c".
func andList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}
