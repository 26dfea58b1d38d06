// Command compat runs trainstep's suites on every supported release of Argo, Tekton, Kubernetes
// and the Kubeflow Trainer (`make test-compat`), and writes docs/compatibility.md from what ran.
//
// Each row (system × release) first ensures its assets with the hack/build-*.sh that
// `make test-assets` uses (a no-op when cached in ~/.cache/trainstep/<system>/<version>), then
// runs its test packages with `go test -json` and the row's assets variable (ARGO_ASSETS,
// TEKTON_ASSETS, KUBEBUILDER_ASSETS, REALSTACK_ASSETS) pointing at them; the other variables
// keep the defaults the Makefile exports. Results are kept per row in docs/compatibility.json,
// so running some rows (ROWS=argo) updates those and leaves the others as they last ran; the
// Markdown is generated from that file alone, and a row never run says so. After each row the
// generated files are remade (make generate): the README's compatibility block comes from it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/trainstep/trainstep/internal/compat"
	"github.com/trainstep/trainstep/internal/generate"
)

const modulePrefix = "github.com/trainstep/trainstep/"

func main() {
	rowsFlag := flag.String("rows", "", "rows to run: systems (argo,tekton,k8s,trainer), rows (argo@v4.0.7) or all; empty runs every row")
	results := flag.String("results", "docs/compatibility.json", "per-row results, read and updated")
	out := flag.String("out", "docs/compatibility.md", "the generated table")
	cache := flag.String("cache", defaultCache(), "the asset cache (~/.cache/trainstep)")
	timeout := flag.Duration("timeout", 40*time.Minute, "go test -timeout for each row")
	renderOnly := flag.Bool("render", false, "only regenerate the Markdown from the results file")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, config{rows: *rowsFlag, results: *results, out: *out, cache: *cache, timeout: *timeout, renderOnly: *renderOnly})
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "compat:", err)
		os.Exit(1)
	}
}

type config struct {
	rows, results, out, cache string
	timeout                   time.Duration
	renderOnly                bool
}

func defaultCache() string {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "trainstep")
}

func run(ctx context.Context, cfg config) error {
	all := matrix(cfg.cache)
	ran, err := compat.Load(cfg.results)
	if err != nil {
		return err
	}
	store := compat.ByID(ran)
	if cfg.renderOnly {
		return os.WriteFile(cfg.out, []byte(render(all, store)), 0o644)
	}
	rows, err := selectRows(all, cfg.rows)
	if err != nil {
		return err
	}
	logs := filepath.Join(cfg.cache, "compat", "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}
	commit, err := gitCommit(ctx)
	if err != nil {
		return err
	}
	mach := thisMachine()
	var failed []string
	for _, r := range rows {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fmt.Fprintf(os.Stderr, "compat: %s: building its assets into %s\n", r.ID(), r.Dir)
		res := runRow(ctx, r, cfg, logs)
		res.Commit, res.Machine = commit, mach
		if res.Status != "pass" {
			failed = append(failed, r.ID())
		}
		fmt.Fprintf(os.Stderr, "compat: %s: %s %s\n", r.ID(), res.Status, res.Reason)
		// Written after each row, so a run stopped halfway keeps what it proved; read again
		// first, so runs of other rows side by side keep theirs.
		if store, err = saveRow(cfg.results, res); err != nil {
			return err
		}
		if err := os.WriteFile(cfg.out, []byte(render(all, store)), 0o644); err != nil {
			return err
		}
		// The README's compatibility block is made from the results (make generate): remade
		// now, so the tree is consistent for the next row's suites, which check it.
		if _, err := generate.Write("."); err != nil {
			return fmt.Errorf("remaking the generated files from the results: %w", err)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("rows not green: %s (%s has each failure; logs in %s)", strings.Join(failed, ", "), cfg.out, logs)
	}
	return nil
}

// runRow builds the row's assets, then runs its packages. A row whose assets cannot be built or
// whose suite cannot run is an error with the reason, never skipped.
func runRow(ctx context.Context, r row, cfg config, logs string) compat.Row {
	res := compat.Row{ID: r.ID(), System: r.System, Version: r.Version, Date: time.Now().UTC().Format(time.RFC3339)}
	buildLog := filepath.Join(logs, r.ID()+"-build.log")
	cached := assetsPresent(r)
	start := time.Now()
	if err := runLogged(ctx, buildLog, "", append(os.Environ(), r.BuildEnv...), r.Build...); err != nil {
		res.Status, res.Reason = "error", fmt.Sprintf("its assets could not be built: %v: %s", err, lastLine(buildLog))
		return res
	}
	res.BuildSeconds, res.BuildCached = int(time.Since(start).Seconds()), cached
	if err := checkRelease(ctx, r); err != nil {
		res.Status, res.Reason = "error", err.Error()
		return res
	}

	env := append(os.Environ(), r.Env+"="+r.Dir)
	start = time.Now()
	faces, testErr, err := runTests(ctx, r, cfg, logs, env)
	res.TestSeconds = int(time.Since(start).Seconds())
	if err != nil {
		res.Status, res.Reason = "error", err.Error()
		return res
	}
	res.Faces, res.Status = faces, "pass"
	for _, fc := range faces {
		if fc.Status != "pass" {
			res.Status = "fail"
		}
	}
	if res.Status == "pass" && testErr != nil {
		res.Status, res.Reason = "fail", fmt.Sprintf("go test failed outside any package: %v", testErr)
	}
	return res
}

// runTests runs the row's packages, then each of its test-only modules, and returns their
// faces. testErr is go test's own failure; err says the suite could not run at all.
func runTests(ctx context.Context, r row, cfg config, logs string, env []string) (faces []compat.Face, testErr, err error) {
	type run struct{ dir, log string }
	runs := []run{{dir: "", log: filepath.Join(logs, r.ID()+"-test.json")}}
	for i, m := range r.Modules {
		runs = append(runs, run{dir: m, log: filepath.Join(logs, fmt.Sprintf("%s-test-module%d.json", r.ID(), i))})
	}
	for _, rn := range runs {
		pkgs := r.Packages
		if rn.dir != "" {
			pkgs = []string{"./..."}
		}
		args := []string{"go", "test", "-json", "-count=1", "-timeout", cfg.timeout.String()}
		if len(r.Tags) > 0 {
			args = append(args, "-tags="+strings.Join(append(goflagsTags(), r.Tags...), ","))
		}
		if r.Serial {
			args = append(args, "-p", "1")
		}
		args = append(args, pkgs...)
		fmt.Fprintf(os.Stderr, "compat: %s: %s in ./%s with %s=%s\n", r.ID(), strings.Join(args, " "), rn.dir, r.Env, r.Dir)
		runErr := runLogged(ctx, rn.log, rn.dir, env, args...)
		f, err := os.Open(rn.log)
		if err != nil {
			return nil, nil, err
		}
		got, err := parseGoTest(f, modulePrefix)
		f.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("its suite did not run: %w: %s", errors.Join(err, runErr), lastLine(rn.log))
		}
		faces = append(faces, got...)
		testErr = errors.Join(testErr, runErr)
	}
	return faces, testErr, nil
}

// goflagsTags are the build tags GOFLAGS sets (the Makefile's nomsgpack): a -tags flag on the
// command line replaces them, so a row's own tags are added to these.
func goflagsTags() []string {
	var tags []string
	for _, f := range strings.Fields(os.Getenv("GOFLAGS")) {
		if v, ok := strings.CutPrefix(f, "-tags="); ok {
			tags = append(tags, strings.Split(v, ",")...)
		}
	}
	return tags
}

// checkRelease reads the row's binary's build info (go version -m) and fails unless its main
// module is the row's release.
func checkRelease(ctx context.Context, r row) error {
	if r.Binary == "" {
		return nil
	}
	bin := filepath.Join(r.Dir, r.Binary)
	out, err := exec.CommandContext(ctx, "go", "version", "-m", bin).Output()
	if err != nil {
		return fmt.Errorf("reading the build info of %s (go version -m): %w", bin, err)
	}
	want := "v" + strings.TrimPrefix(r.Version, "v")
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && f[0] == "mod" {
			if f[1] != r.Module || f[2] != want {
				return fmt.Errorf("%s was built from %s %s, not %s %s: remove %s and run again", bin, f[1], f[2], r.Module, want, r.Dir)
			}
			return nil
		}
	}
	return fmt.Errorf("%s has no module build info: remove %s and run again", bin, r.Dir)
}

// assetsPresent tells whether the row's cache directory already exists, so the table can tell a
// cold build's cost from a cache hit.
func assetsPresent(r row) bool {
	_, err := os.Stat(r.Dir)
	return err == nil
}

// runLogged runs argv in dir ("" is the current directory) with its output in logFile.
func runLogged(ctx context.Context, logFile, dir string, env []string, argv ...string) error {
	f, err := os.Create(logFile)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, f, f
	// The whole process group ends with us (go test's test binaries, a build's compilers).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	return nil
}

// lastLine is the last non-empty line of a log, what a failed build says last.
func lastLine(file string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func gitCommit(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "", fmt.Errorf("reading the commit under test (git rev-parse): %w", err)
	}
	commit := strings.TrimSpace(string(out))
	// Changes beyond the files this command writes mean the table proves an uncommitted tree:
	// say so. It writes the results, the table and the README's block made from them.
	st, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--", ".", ":!docs/compatibility.md", ":!docs/compatibility.json", ":!README.md").Output()
	if err != nil {
		return "", fmt.Errorf("reading the work tree's state (git status): %w", err)
	}
	if strings.TrimSpace(string(st)) != "" {
		commit += "-dirty"
	}
	return commit, nil
}

// saveRow puts res into the results file as it is now and returns the whole table.
func saveRow(file string, res compat.Row) (map[string]compat.Row, error) {
	ran, err := compat.Load(file)
	if err != nil {
		return nil, err
	}
	store := compat.ByID(ran)
	store[res.ID] = res
	return store, saveResults(file, store)
}

// saveResults writes the per-row results in the matrix's order.
func saveResults(file string, store map[string]compat.Row) error {
	list := make([]compat.Row, 0, len(store))
	for _, r := range matrix("") { // matrix order, so the file diffs well
		if res, ok := store[r.ID()]; ok {
			list = append(list, res)
		}
	}
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, append(b, '\n'), 0o644)
}
