// Package cli is the executor command line: flags in, one face of trainstep out.
package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"github.com/trainstep/trainstep/core/trainjob"
)

// Exit codes of `executor run`, documented in docs/cli.md.
const (
	ExitSucceeded  = 0
	ExitFailed     = 1 // the TrainJob failed
	ExitInvalid    = 2 // bad input: nothing was created
	ExitTimedOut   = 3 // the step's timeout passed
	ExitError      = 4 // the step could not be run (cluster unreachable, API error, …)
	ExitNoEntry    = 5 // --local: torchrun / mpirun / python is not installed
	ExitInterrupts = 130
)

// Main runs the command line and returns the exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return MainWith(ctx, args, stdin, stdout, stderr, Overrides{})
}

// Overrides replace what a test bed cannot provide: a kubelet to read pod logs from; and let it
// see what it cannot otherwise: the connections a step dials to the apiserver.
type Overrides struct {
	Logs trainjob.LogSource
	// Config, when set, adjusts run's cluster config (a counting Dial or WrapTransport).
	Config func(*rest.Config)
}

// MainWith is Main with test seams.
func MainWith(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, ov Overrides) int {
	code := ExitSucceeded
	root := &cobra.Command{
		Use:   "executor",
		Short: "Run Kubeflow Trainer TrainJobs as pipeline steps",
		Example: `  # Run a step: on the cluster of the current kubeconfig context, or --local on this machine
  executor run -f train.yaml
  executor run -f train.yaml --local

  # The runtimes a step can use on this cluster (--stock: those built into the binary)
  executor runtimes

  # Shell completion, here for bash (also zsh, fish, powershell)
  source <(executor completion bash)`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newRunCommand(&code, ov), newRuntimesCommand(), newTrainersCommand(), newArgoPluginCommand(), newArgoJanitorCommand(), newTektonControllerCommand(), newVersionCommand())
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		if code == ExitSucceeded {
			code = ExitInvalid // cobra's own errors are usage errors
		}
	}
	return code
}
