// Package kueue_test runs the executor binary against the real stack with the real Kueue v0.17.0
// in front of the Trainer (test/internal/realstack/kueue.go). A suite of its own: Kueue's TrainJob
// webhooks answer for every TrainJob (an unknown runtime is refused in Kueue's words first), which
// test/realstack's checks of the Trainer's own webhook must not meet. The stack starts once.
package kueue_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
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
	dir, err := os.MkdirTemp("", "trainstep-kueue-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "executor")
	if out, err := exec.Command("go", "build", "-o", bin, "../../../cmd/executor").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the executor: %v\n%s", err, out)
		os.Exit(1)
	}
	code := realstack.RunWith(m, &stack, realstack.StartKueue)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
	outputs        map[string]string
}

// syncBuffer is a buffer the executor writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// runningExecutor is the real binary running a step in the background, as a pipeline step does.
type runningExecutor struct {
	cmd            *exec.Cmd
	stdout, stderr syncBuffer
	outDir         string
	done           chan struct{}
	err            error
}

func startExecutor(t *testing.T, ns, step string) *runningExecutor {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "step.yaml")
	require.NoError(t, os.WriteFile(file, []byte(step), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	r := &runningExecutor{outDir: filepath.Join(dir, "outputs"), done: make(chan struct{})}
	r.cmd = exec.CommandContext(ctx, bin, "run", "--namespace", ns, "-f", file, "--output-dir", r.outDir)
	r.cmd.Env = append(os.Environ(), "KUBECONFIG="+stack.Kubeconfig)
	r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
	require.NoError(t, r.cmd.Start())
	go func() {
		r.err = r.cmd.Wait()
		cancel()
		close(r.done)
	}()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

func (r *runningExecutor) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// result waits for the executor to end and reads its outputs.
func (r *runningExecutor) result(t *testing.T) result {
	t.Helper()
	<-r.done
	res := result{stdout: r.stdout.String(), stderr: r.stderr.String(), outputs: map[string]string{}}
	var ee *exec.ExitError
	if errors.As(r.err, &ee) {
		res.code = ee.ExitCode()
	} else {
		require.NoError(t, r.err)
	}
	entries, _ := os.ReadDir(r.outDir)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(r.outDir, e.Name()))
		require.NoError(t, err)
		res.outputs[e.Name()] = string(b)
	}
	return res
}

// executor runs the real binary to its end.
func executor(t *testing.T, ns, step string) result {
	t.Helper()
	return startExecutor(t, ns, step).result(t)
}

func onlyTrainJob(t *testing.T, ns string) *trainer.TrainJob {
	t.Helper()
	tjs := testenv.TrainJobs(t.Context(), t, stack.Client, ns)
	require.Len(t, tjs, 1)
	return &tjs[0]
}
