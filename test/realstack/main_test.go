// Package realstack_test runs trainstep against the real stack: the real Kubeflow Trainer and
// JobSet managers with their webhooks, the Job controller, kube-scheduler and kwok Nodes
// (test/internal/realstack). The stack starts once for the package.
package realstack_test

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/trainstep/trainstep/test/internal/realstack"
)

var (
	stack *realstack.Stack
	bin   string // the executor binary, built from this tree
)

// parallel is how many tests run at once unless -test.parallel says otherwise: they mostly wait
// on the stack's controllers and kwok's stage delays, so the default (GOMAXPROCS, 2 on a small
// machine) would leave the suite waiting in line.
const parallel = "16"

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		if err := flag.Set("test.parallel", parallel); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	os.Exit(realstack.RunWithExecutor(m, &stack, &bin, realstack.Options{}, nil))
}
