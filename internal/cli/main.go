// Package cli is the executor command line: flags in, one face of trainstep out.
package cli

import (
	"context"
	"fmt"
	"io"

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
