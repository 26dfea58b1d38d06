// Command executor is trainstep: a Kubeflow Trainer TrainJob as a pipeline step. One binary, three
// faces: `run` (any container step, or a laptop with --local), `argo-plugin` and
// `tekton-controller`.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes of `executor run`, documented in the README.
const (
	ExitSucceeded  = 0
	ExitFailed     = 1 // the TrainJob failed
	ExitInvalid    = 2 // bad input: nothing was created
	ExitTimedOut   = 3 // the step's timeout passed
	ExitError      = 4 // the step could not be run (cluster unreachable, API error, …)
	ExitNoEntry    = 5 // --local: torchrun / mpirun / python is not installed
	ExitInterrupts = 130
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Main runs the command line and returns the exit code; tests call it in-process.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	code := ExitSucceeded
	root := &cobra.Command{
		Use:           "executor",
		Short:         "Run Kubeflow Trainer TrainJobs as pipeline steps",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newRunCommand(&code), newRuntimesCommand(), newTrainersCommand())
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		if code == ExitSucceeded {
			code = ExitInvalid // cobra's own errors are usage errors
		}
	}
	return code
}
