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
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/trainstep/trainstep/internal/testenv"
	"github.com/trainstep/trainstep/internal/trainersim"
)

var (
	env *testenv.Env
	bin string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctrllog.SetLogger(logr.Discard())
	dir, err := os.MkdirTemp("", "trainstep-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin = filepath.Join(dir, "executor")
	if out, err := exec.Command("go", "build", "-o", bin, "../../../cmd/executor").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the executor: %v\n%s", err, out)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start, stop := context.WithTimeout(ctx, 3*time.Minute)
	env, err = testenv.Start(start, testenv.Options{ControllerManager: true})
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the control plane:", err)
		return 1
	}
	defer func() {
		cancel()
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	}()
	if _, err := trainersim.Start(ctx, env.Config, trainersim.ByLabel); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
