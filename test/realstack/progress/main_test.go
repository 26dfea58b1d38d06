// Package progress_test runs trainstep against the real stack with the Trainer's TrainJobStatus
// feature gate on (test/internal/realstack, Options.TrainJobStatus): the Trainer injects the
// status server's URL, CA and token into the trainer containers and its status server writes
// status.trainerStatus from what a pod posts. A test plays rank 0: it reads what the Trainer
// injected into the node pod, gets the token that pod would have, and posts as the SDK does.
package progress_test

import (
	"os"
	"testing"

	"github.com/trainstep/trainstep/test/internal/realstack"
)

var (
	stack *realstack.Stack
	bin   string // the executor binary, built from this tree
)

func TestMain(m *testing.M) {
	os.Exit(realstack.RunWithExecutor(m, &stack, &bin, realstack.Options{TrainJobStatus: true}, nil))
}
