// Package multikueue_test runs trainstep on a MultiKueue manager: two real stacks on loopback
// (test/internal/realstack/multikueue.go), the manager dispatching each queued TrainJob to the
// worker through the real Kueue v0.17.0, the worker running it on the real Trainer; the executor
// binary and the Tekton face (Tekton's own controller and trainstep's, on the manager) follow
// it there. The stacks start once for the package.
package multikueue_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/trainstep/trainstep/test/internal/realstack"
	"github.com/trainstep/trainstep/test/internal/tektonharness"
)

var (
	manager, worker *realstack.Stack
	bin             string // the executor binary, built from this tree
	// tk is Tekton's controller and trainstep's Tekton controller on the manager.
	tk *tektonharness.OnStack
)

func TestMain(m *testing.M) {
	flag.Parse()
	var removeBin func()
	var err error
	if bin, removeBin, err = realstack.BuildExecutor(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Missing Tekton assets fail the suite before the stacks start, never skip it.
	if _, err := tektonharness.ControllerBinary(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := realstack.RunWith(m, &manager, func(ctx context.Context, s *realstack.Stack) (func(), error) {
		w, stopWorker, err := realstack.StartMultiKueue(ctx, s)
		if err != nil {
			return nil, err
		}
		worker = w
		if tk, err = tektonharness.StartOnStack(ctx, s); err != nil {
			return stopWorker, err
		}
		return func() { tk.Stop(); stopWorker() }, nil
	})
	removeBin()
	os.Exit(code)
}
