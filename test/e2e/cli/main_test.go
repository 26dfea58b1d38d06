// Package cli_test runs the executor binary, as a pipeline step would, against the real apiserver
// with the Trainer simulator, and on the local backend.
package cli_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/trainstep/trainstep/internal/version"
	"github.com/trainstep/trainstep/test/internal/testenv"
	"github.com/trainstep/trainstep/test/internal/trainersim"
)

var (
	env *testenv.Env
	bin string
)

func TestMain(m *testing.M) {
	testenv.QuietLogs()
	dir, err := os.MkdirTemp("", "trainstep-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "executor")
	// Stamped as `make build` stamps it, so TestVersionSaysWhatWasBuilt sees what a user sees.
	if out, err := exec.Command("go", "build", "-ldflags", version.LDFlags(stampVersion, stampCommit), "-o", bin, "../../../cmd/executor").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the executor: %v\n%s", err, out)
		os.Exit(1)
	}
	code := testenv.Run(m, &env, testenv.Options{ControllerManager: true}, func(ctx context.Context, e *testenv.Env) error {
		_, err := trainersim.Start(ctx, e.Config, trainersim.ByLabel)
		return err
	})
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
