// Command executor is trainstep: a Kubeflow Trainer TrainJob as a pipeline step. One binary, three
// faces: `run` (any container step, or a laptop with --local), `argo-plugin` and
// `tekton-controller`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/trainstep/trainstep/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
