// Package realstack_test runs trainstep against the real stack: the real Kubeflow Trainer and
// JobSet managers with their webhooks, the Job controller, kube-scheduler and kwok Nodes
// (test/internal/realstack). The stack starts once for the package.
package realstack_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/trainstep/trainstep/test/internal/realstack"
)

var (
	stack *realstack.Stack
	bin   string // the executor binary, built from this tree
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "trainstep-realstack-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "executor")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/executor").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the executor: %v\n%s", err, out)
		os.Exit(1)
	}
	code := realstack.Run(m, &stack)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
