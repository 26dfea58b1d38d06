// Package kueue_test runs the executor binary against the real stack with the real Kueue v0.17.0
// in front of the Trainer (test/internal/realstack/kueue.go). A suite of its own: Kueue's TrainJob
// webhooks answer for every TrainJob (an unknown runtime is refused in Kueue's words first), which
// test/realstack's checks of the Trainer's own webhook must not meet. The stack starts once.
package kueue_test

import (
	"os"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/test/internal/realstack"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

var (
	stack *realstack.Stack
	bin   string // the executor binary, built from this tree
)

const (
	timeout  = 3 * time.Minute
	interval = 200 * time.Millisecond
)

func TestMain(m *testing.M) {
	os.Exit(realstack.RunWithExecutor(m, &stack, &bin, realstack.Options{}, realstack.StartKueue))
}

// startExecutor starts the real binary against the stack, as a pipeline step does, so a test can
// act on the cluster while the step waits.
func startExecutor(t *testing.T, ns, step string) *realstack.Executor {
	t.Helper()
	return stack.StartExecutor(t, bin, ns, step, timeout)
}

// executor runs the real binary to its end.
func executor(t *testing.T, ns, step string) realstack.ExecutorResult {
	t.Helper()
	return startExecutor(t, ns, step).Result(t)
}

func onlyTrainJob(t *testing.T, ns string) *trainer.TrainJob {
	t.Helper()
	tjs := testenv.TrainJobs(t.Context(), t, stack.Client, ns)
	require.Len(t, tjs, 1)
	return &tjs[0]
}
