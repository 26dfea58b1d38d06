package main

import (
	"fmt"
	"path/filepath"
	"strings"
)

// A row is one release of one system: the test assets it needs (built by a hack/build-*.sh into
// the same cache `make test-assets` uses), the environment variable that points the harnesses
// at them, and the test packages (faces) that prove trainstep on it.
type row struct {
	System  string // argo, tekton, k8s, trainer
	Version string
	// Default marks the release `make test` runs (its assets are built by `make test-assets`).
	Default bool
	// Env is the variable the harnesses read the assets from, and Dir its value.
	Env, Dir string
	// Build is the command that ensures Dir holds the assets (a no-op when cached).
	Build []string
	// BuildEnv is added to the build command's environment.
	BuildEnv []string
	// Binary in Dir must have been built from Module at Version (its build info says so), so a
	// cache directory holding another release's binary fails the row instead of proving the
	// wrong release. Empty: not checked.
	Binary, Module string
	// Packages are the test packages run with Env=Dir, each a face of the table.
	Packages []string
	// Serial runs the packages one at a time (go test -p 1): the Argo suites share a machine-wide
	// lock, and one waiting out another's long run would fail on its own deadline.
	Serial bool
	// Modules are test-only modules (directories with their own go.mod) whose packages run in
	// the row too: a proof against the release's own Go types, which the main go.mod lacks.
	Modules []string
	// Tags are build tags the row's packages need beside the Makefile's (compat: suites that
	// need assets `make test-assets` does not build, such as a second Trainer release).
	Tags []string
}

// ID is how ROWS names the row: system@version.
func (r row) ID() string { return r.System + "@" + r.Version }

// trainerJobSet is the JobSet each Trainer release's go.mod requires, and kwok is the one
// pinned for the real stack.
var trainerJobSet = [][2]string{{"v2.0.1", "v0.8.2"}, {"v2.1.0", "v0.10.1"}, {"v2.2.1", "v0.11.1"}, {"v2.3.0", "v0.12.0"}}

const realstackKwok = "v0.8.0"

// matrix is every row, in the order of the table. cache is ~/.cache/trainstep.
func matrix(cache string) []row {
	var rows []row
	for _, v := range []string{"v3.6.12", "v3.7.3", "v3.7.9", "v4.0.7"} {
		dir := filepath.Join(cache, "argo", v)
		r := row{System: "argo", Version: v, Default: v == "v3.7.3", Env: "ARGO_ASSETS", Dir: dir, Serial: true,
			Build:  []string{"bash", "hack/build-argo.sh", dir, v},
			Binary: "argoexec", Module: "github.com/argoproj/argo-workflows/" + strings.SplitN(v, ".", 2)[0],
			Packages: []string{"./test/e2e/argo", "./test/realstack/argo", "./test/conformance"}}
		if strings.HasPrefix(v, "v4.") {
			// The plugin is built against v3's types; this module decodes its wire against v4's.
			r.Modules = []string{"test/compat/argov4"}
		}
		rows = append(rows, r)
	}
	for _, v := range []string{"v0.68.0", "v1.0.0", "v1.3.0", "v1.15.0"} {
		dir := filepath.Join(cache, "tekton", v)
		rows = append(rows, row{System: "tekton", Version: v, Default: v == "v1.3.0", Env: "TEKTON_ASSETS", Dir: dir,
			Build:  []string{"bash", "hack/build-tekton.sh", dir, v},
			Binary: "tekton-controller", Module: "github.com/tektoncd/pipeline",
			Packages: []string{"./test/e2e/tekton", "./test/e2e/tektonrbac"}})
	}
	for _, v := range []string{"1.33.13", "1.36.3", "1.37.2"} {
		dir := filepath.Join(cache, "k8s", "v"+v)
		rows = append(rows, row{System: "k8s", Version: v, Default: v == "1.36.3", Env: "KUBEBUILDER_ASSETS", Dir: dir,
			Build:  []string{"bash", "hack/build-control-plane.sh", dir, v, "kube-controller-manager", "kube-scheduler"},
			Binary: "kube-apiserver", Module: "k8s.io/kubernetes",
			// The real stack too: the pinned Trainer and JobSet on this apiserver and scheduler.
			Packages: []string{"./internal/...", "./test/integration/...", "./test/realstack", "./test/conformance"}})
	}
	for _, tj := range trainerJobSet {
		r := row{System: "trainer", Version: tj[0], Default: tj[0] == "v2.3.0", Env: "REALSTACK_ASSETS", Dir: realstackDir(cache, tj),
			Build:    []string{"bash", "hack/build-realstack.sh", realstackDir(cache, tj)},
			BuildEnv: []string{"TRAINER_VERSION=" + tj[0], "JOBSET_VERSION=" + tj[1], "KWOK_VERSION=" + realstackKwok},
			// The conformance table runs every face's steps on the release, as test/realstack the CLI's.
			Packages: []string{"./test/realstack", "./test/conformance"}}
		if tj[0] == upgradeFrom {
			// The upgrade to the next release under a running step; the next release's assets
			// are the pinned ones `make test-assets` builds (test/realstack/upgrade).
			r.Packages = append(r.Packages, "./test/realstack/upgrade")
			r.Tags = []string{"compat"}
		}
		rows = append(rows, r)
	}
	return rows
}

// upgradeFrom is the Trainer release the upgrade test starts on; it upgrades to the pinned one.
const upgradeFrom = "v2.2.1"

// realstackDir is where hack/build-realstack.sh builds a Trainer release and its JobSet.
func realstackDir(cache string, tj [2]string) string {
	return filepath.Join(cache, "realstack", fmt.Sprintf("trainer-%s-jobset-%s-kwok-%s", tj[0], tj[1], realstackKwok))
}

// selectRows picks the rows ROWS names: a comma-separated list of systems (argo), rows
// (argo@v4.0.7) or "all"; empty is all.
func selectRows(all []row, spec string) ([]row, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" || spec == "all" {
		return all, nil
	}
	picked := map[string]bool{}
	for _, s := range strings.Split(spec, ",") {
		s = strings.TrimSpace(s)
		found := false
		for _, r := range all {
			if s == r.ID() || s == r.System {
				picked[r.ID()], found = true, true
			}
		}
		if !found {
			return nil, fmt.Errorf("ROWS=%q: no row %q; name a system (argo, tekton, k8s, trainer) or a row such as argo@v4.0.7", spec, s)
		}
	}
	var out []row
	for _, r := range all {
		if picked[r.ID()] {
			out = append(out, r)
		}
	}
	return out, nil
}
