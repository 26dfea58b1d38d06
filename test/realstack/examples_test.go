package realstack_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/test/internal/realstack"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// exampleHeader is what a step example's header tells its user: the Trainer release it needs,
// the commands to run first, and the command that runs it.
type exampleHeader struct {
	needsMinor int // the Trainer minor release it needs (v2.<needsMinor>)
	secrets    []*corev1.Secret
	run        string // the command that runs it
}

var (
	needsTrainer = regexp.MustCompile(`Kubeflow Trainer v2\.(\d+)(\.\d+)? or later`)
	createSecret = regexp.MustCompile(`^#\s+kubectl create secret generic (\S+)((?: --from-literal=\S+)+)\s*$`)
	runCommand   = regexp.MustCompile(`^#\s+(executor run .*\S)\s*$`)
)

// parseExampleHeader reads the leading comment of a step example.
func parseExampleHeader(t *testing.T, file string, b []byte) exampleHeader {
	t.Helper()
	var h exampleHeader
	var comment []string
	for line := range strings.Lines(string(b)) {
		if !strings.HasPrefix(line, "#") {
			break
		}
		line = strings.TrimRight(line, "\n")
		comment = append(comment, line)
		if m := createSecret.FindStringSubmatch(line); m != nil {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: m[1]}, StringData: map[string]string{}}
			for _, lit := range strings.Fields(m[2]) {
				k, v, ok := strings.Cut(strings.TrimPrefix(lit, "--from-literal="), "=")
				require.True(t, ok, "%s: %q is not --from-literal=KEY=VALUE", file, lit)
				s.StringData[k] = v
			}
			h.secrets = append(h.secrets, s)
		}
		if m := runCommand.FindStringSubmatch(line); m != nil {
			h.run = m[1]
		}
	}
	m := needsTrainer.FindStringSubmatch(strings.Join(comment, " "))
	require.NotNil(t, m, "%s: the header does not say which Kubeflow Trainer release it needs (\"Needs: Kubeflow Trainer v2.N or later\")", file)
	h.needsMinor, _ = strconv.Atoi(m[1])
	return h
}

// TestEveryStepExampleRunsAsWritten runs each file under examples/steps as its header says: the
// commands it lists first (its Secrets), then `executor run -f` of the file's own bytes, against
// the real Trainer, JobSet and their webhooks, on a release the header says is enough.
func TestEveryStepExampleRunsAsWritten(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "steps", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			b, err := os.ReadFile(file)
			require.NoError(t, err)
			h := parseExampleHeader(t, file, b)
			assert.Equal(t, "executor run -f examples/steps/"+filepath.Base(file), h.run,
				"the header's command is the one this test runs")
			ns := stack.Namespace(t)
			for _, s := range h.secrets {
				s.Namespace = ns
				require.NoError(t, stack.Client.Create(t.Context(), s))
			}
			if minorOf(trainerRelease(t)) < h.needsMinor {
				// What an older release does with it differs per example (refused at plan time, or
				// waiting for a PVC it does not make); the release's own suites cover that.
				realstack.Lacks(t, "Trainer %s is older than the v2.%d %s says it needs: not run", trainerRelease(t), h.needsMinor, filepath.Base(file))
				return
			}
			r := executor(t, ns, string(b))
			require.Equal(t, cli.ExitSucceeded, r.Code, "stderr:\n%s\nstdout:\n%s", r.Stderr, r.Stdout)
			assert.Equal(t, "Succeeded", r.Outputs["phase"])
			assert.Len(t, testenv.TrainJobs(t.Context(), t, stack.Client, ns), 1, "one TrainJob per run")
		})
	}
}
