package realstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/test/internal/harnessutil"

	"github.com/trainstep/trainstep/internal/release"
	"github.com/trainstep/trainstep/test/internal/podrunner"
)

// Executor is the real `executor run` against a stack, started in the background the way a
// pipeline step runs it (the step in a file, KUBECONFIG, --output-dir), so a test can act on the
// cluster while the step waits.
type Executor struct {
	// Stdout and Stderr are what the executor wrote so far.
	Stdout, Stderr harnessutil.SyncBuffer
	cmd            *exec.Cmd
	outDir         string
	done           chan struct{}
	err            error
}

// ExecutorResult is how an executor run ended: its exit code, what it wrote, and its outputs
// (one file each in --output-dir).
type ExecutorResult struct {
	Code           int
	Stdout, Stderr string
	Outputs        map[string]string
}

// StartExecutor starts binary bin running step in namespace ns against s, with extra flags after
// the step's. The run is killed after timeout and when the test ends.
func (s *Stack) StartExecutor(t *testing.T, bin, ns, step string, timeout time.Duration, extra ...string) *Executor {
	t.Helper()
	return s.startExecutor(t, false, bin, ns, step, timeout, extra...)
}

// StartExecutorOnATerminal is StartExecutor with the executor's stdout and stderr on a
// pseudo-terminal, as a person running it in a shell sees it (the status line redrawn in
// place): all it draws is in Stderr.
func (s *Stack) StartExecutorOnATerminal(t *testing.T, bin, ns, step string, timeout time.Duration, extra ...string) *Executor {
	t.Helper()
	return s.startExecutor(t, true, bin, ns, step, timeout, extra...)
}

func (s *Stack) startExecutor(t *testing.T, onATerminal bool, bin, ns, step string, timeout time.Duration, extra ...string) *Executor {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "step.yaml")
	require.NoError(t, os.WriteFile(file, []byte(step), 0o644))
	e := &Executor{outDir: filepath.Join(dir, "outputs"), done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	e.cmd = exec.CommandContext(ctx, bin, append([]string{"run", "--namespace", ns, "-f", file, "--output-dir", e.outDir}, extra...)...)
	e.cmd.Env = append(os.Environ(), "KUBECONFIG="+s.Kubeconfig)
	copied := make(chan struct{})
	if onATerminal {
		tty, err := pty.StartWithSize(e.cmd, &pty.Winsize{Rows: 40, Cols: 200})
		if err != nil {
			cancel()
			require.NoError(t, err)
		}
		go func() {
			// Until the executor exits and the terminal closes (EIO).
			_, _ = io.Copy(&e.Stderr, tty)
			_ = tty.Close()
			close(copied)
		}()
	} else {
		close(copied)
		e.cmd.Stdout, e.cmd.Stderr = &e.Stdout, &e.Stderr
		if err := e.cmd.Start(); err != nil {
			cancel()
			require.NoError(t, err)
		}
	}
	go func() {
		e.err = e.cmd.Wait()
		<-copied
		cancel()
		close(e.done)
	}()
	t.Cleanup(func() { cancel(); <-e.done })
	return e
}

// Signal sends sig to the executor, as a pipeline engine stopping the step does.
func (e *Executor) Signal(t *testing.T, sig os.Signal) {
	t.Helper()
	require.NoError(t, e.cmd.Process.Signal(sig))
}

// Exited says whether the executor has ended.
func (e *Executor) Exited() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// Result waits for the executor to end (at the latest when its timeout kills it) and reads its
// outputs.
func (e *Executor) Result(t *testing.T) ExecutorResult {
	t.Helper()
	<-e.done
	res := ExecutorResult{Stdout: e.Stdout.String(), Stderr: e.Stderr.String(), Outputs: map[string]string{}}
	var ee *exec.ExitError
	if errors.As(e.err, &ee) {
		res.Code = ee.ExitCode()
	} else {
		require.NoError(t, e.err)
	}
	entries, _ := os.ReadDir(e.outDir)
	for _, f := range entries {
		b, err := os.ReadFile(filepath.Join(e.outDir, f.Name()))
		require.NoError(t, err)
		res.Outputs[f.Name()] = string(b)
	}
	return res
}

// RunWithExecutor is RunWithOptions with the executor of this tree built into *bin first, for a
// suite that runs the real binary against the stack.
func RunWithExecutor(m *testing.M, s **Stack, bin *string, opts Options, setUp SetUp) int {
	built, remove, err := BuildExecutor()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer remove()
	*bin = built
	return RunWithOptions(m, s, opts, setUp)
}

// BuildExecutor builds the executor of this tree into a temporary directory, for a suite's
// TestMain; remove deletes it once the suite is done. Not under /tmp: a pod the pod runner runs
// has a /tmp of its own, which would hide the binary it mounts as the trainstep image's
// /executor.
func BuildExecutor() (bin string, remove func(), err error) {
	dir, err := os.MkdirTemp("/var/tmp", "trainstep-executor-")
	if err != nil {
		return "", nil, err
	}
	bin = filepath.Join(dir, "executor")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/trainstep/trainstep/cmd/executor").CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, fmt.Errorf("building the executor: %w\n%s", err, out)
	}
	return bin, func() { _ = os.RemoveAll(dir) }, nil
}

// TrainstepImage builds this tree's executor and returns the pod runner's view of the trainstep
// image (release.DevImage, what make image builds and the manifests and examples name): the
// executor at /executor. remove deletes the build once the suite is done.
func TrainstepImage() (image podrunner.Image, remove func(), err error) {
	bin, remove, err := BuildExecutor()
	if err != nil {
		return podrunner.Image{}, nil, err
	}
	return podrunner.Image{Prefix: release.DevImage, Files: map[string]string{"/executor": bin}}, remove, nil
}
