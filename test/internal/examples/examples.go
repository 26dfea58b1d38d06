// Package examples reads what the header of a step example under examples/steps tells its user
// to do, so that the suites that run the examples run each one exactly so: the Trainer release
// it needs, the Secrets to create first, the Kueue LocalQueue it names, and the command that
// runs it. The realstack suite runs the examples that need no Kueue, the conformance suite (the
// stack with Kueue) the ones that do, test/e2e/cli the ones run with --local;
// TestEveryStepExampleHasAHeaderToFollow keeps that split
// whole.
package examples

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Step is one file of examples/steps and what its header says.
type Step struct {
	// Name is the file's name, e.g. hello-xgboost.yaml.
	Name string
	// Bytes are the file's bytes, as the user runs them.
	Bytes []byte
	// NeedsMinor is the Trainer minor release the header says it needs (v2.<NeedsMinor>).
	NeedsMinor int
	// Secrets are what the header's `kubectl create secret generic` lines create.
	Secrets []*corev1.Secret
	// LocalQueue is the Kueue LocalQueue the header says must exist in the step's namespace
	// ("a LocalQueue named NAME"), or "" when it needs no Kueue.
	LocalQueue string
	// Run is the command the header says runs it: the first, where it says to run it more than
	// once (Runs, in order).
	Run  string
	Runs []string
	// Local says the header runs it with `executor run --local`: no cluster (test/e2e/cli).
	Local bool
}

var (
	needsTrainer = regexp.MustCompile(`Kubeflow Trainer v2\.(\d+)(\.\d+)? or later`)
	needsQueue   = regexp.MustCompile(`a LocalQueue named (\S+) in the\s+step's namespace`)
	createSecret = regexp.MustCompile(`^#\s+kubectl create secret generic (\S+)((?: --from-literal=\S+)+)\s*$`)
	runCommand   = regexp.MustCompile(`^#\s+(executor run .*\S)\s*$`)
)

// Dir is examples/steps of this checkout, wherever the test runs from.
func Dir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cannot tell where package examples is, to find examples/steps from it")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "examples", "steps"), nil
}

// Steps reads every file of examples/steps and its header.
func Steps() ([]Step, error) {
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no step examples in %s", dir)
	}
	steps := make([]Step, 0, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		s, err := Parse(filepath.Base(f), b)
		if err != nil {
			return nil, err
		}
		steps = append(steps, s)
	}
	return steps, nil
}

// Parse reads the leading comment of a step example named name.
func Parse(name string, b []byte) (Step, error) {
	s := Step{Name: name, Bytes: b}
	var comment []string
	for line := range strings.Lines(string(b)) {
		if !strings.HasPrefix(line, "#") {
			break
		}
		line = strings.TrimRight(line, "\n")
		comment = append(comment, line)
		if m := createSecret.FindStringSubmatch(line); m != nil {
			secret, err := secretOf(name, m[1], m[2])
			if err != nil {
				return Step{}, err
			}
			s.Secrets = append(s.Secrets, secret)
		}
		if m := runCommand.FindStringSubmatch(line); m != nil {
			s.Runs = append(s.Runs, m[1])
		}
	}
	// Phrases may wrap across comment lines: match them in the comment as one line.
	text := strings.Join(comment, " ")
	text = strings.Join(strings.Fields(strings.ReplaceAll(text, "#", " ")), " ")
	minor, ok := needsTrainerMinor(text)
	if !ok {
		return Step{}, fmt.Errorf("%s: the header does not say which Kubeflow Trainer release it needs: add \"Needs: Kubeflow Trainer v2.N or later\"", name)
	}
	s.NeedsMinor = minor
	if q := needsQueue.FindStringSubmatch(text); q != nil {
		s.LocalQueue = strings.Trim(q[1], "`,.")
	}
	if len(s.Runs) == 0 {
		return Step{}, fmt.Errorf("%s: the header has no command that runs it: add a line \"#   executor run -f examples/steps/%s\"", name, name)
	}
	s.Run = s.Runs[0]
	for i, r := range s.Runs {
		local := slices.Contains(strings.Fields(r), "--local")
		if i > 0 && local != s.Local {
			return Step{}, fmt.Errorf("%s: the header runs it both with and without --local: run it one way, so one suite follows it", name)
		}
		s.Local = local
	}
	return s, nil
}

// NeedsTrainerMinor is the Trainer minor release (v2.N) the header of an example file of any
// kind says it needs ("Kubeflow Trainer v2.N or later"), and whether it says so.
func NeedsTrainerMinor(file []byte) (int, bool) {
	var comment []string
	for line := range strings.Lines(string(file)) {
		if !strings.HasPrefix(line, "#") {
			break
		}
		comment = append(comment, line)
	}
	return needsTrainerMinor(strings.Join(strings.Fields(strings.ReplaceAll(strings.Join(comment, " "), "#", " ")), " "))
}

func needsTrainerMinor(header string) (int, bool) {
	m := needsTrainer.FindStringSubmatch(header)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}

// secretOf is the Secret of `kubectl create secret generic NAME --from-literal=K=V …`.
func secretOf(file, name, literals string) (*corev1.Secret, error) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: map[string]string{}}
	for _, lit := range strings.Fields(literals) {
		k, v, ok := strings.Cut(strings.TrimPrefix(lit, "--from-literal="), "=")
		if !ok {
			return nil, fmt.Errorf("%s: %q is not --from-literal=KEY=VALUE", file, lit)
		}
		s.StringData[k] = v
	}
	return s, nil
}
