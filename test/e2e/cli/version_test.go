package cli_test

import (
	"encoding/json"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/internal/version"
)

// The release and commit TestMain links into the binary, as `make build` does with VERSION and COMMIT.
const (
	stampVersion = "v0.0.0-e2e"
	stampCommit  = "0123456789abcdef0123456789abcdef01234567"
)

// goModVersion is the version go.mod pins module at.
func goModVersion(t *testing.T, module string) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "go", "list", "-m", "-f", "{{.Version}}", module).Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

func TestVersionSaysWhatWasBuilt(t *testing.T) {
	want := version.Info{
		Version: stampVersion, Commit: stampCommit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
		Trainer: goModVersion(t, version.TrainerModule), Argo: goModVersion(t, version.ArgoModule),
		Tekton: goModVersion(t, "github.com/tektoncd/pipeline"),
	}

	cmd, stdout, stderr := command(t, "version", "-o", "json")
	require.NoError(t, cmd.Run(), stderr.String())
	var got version.Info
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &got), stdout.String())
	assert.Equal(t, want, got)

	cmd, stdout, stderr = command(t, "version")
	require.NoError(t, cmd.Run(), stderr.String())
	for _, line := range []string{
		"version:   " + want.Version,
		"commit:    " + want.Commit,
		"go:        " + want.GoVersion,
		"trainer:   " + want.Trainer + " (trainer.kubeflow.org/v1alpha1",
		"argo:      " + want.Argo + " (argoproj.io/v1alpha1",
		"tekton:    " + want.Tekton + " (tekton.dev/v1beta1 CustomRun",
	} {
		assert.Contains(t, stdout.String(), line)
	}
}

func TestVersionRefusesAnUnknownOutput(t *testing.T) {
	cmd, stdout, stderr := command(t, "version", "-o", "yaml")
	err := cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, cli.ExitInvalid, ee.ExitCode())
	assert.Empty(t, stdout.String())
	assert.Contains(t, stderr.String(), `--output "yaml": use json`)
}
