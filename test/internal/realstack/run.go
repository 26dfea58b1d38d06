package realstack

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Run is the body of a suite's TestMain: it starts the stack into *s, runs the tests, stops the
// stack and returns the exit code for os.Exit. A stack that does not start (missing binaries
// included) fails the suite with the reason and the failing process's log tail; it never skips.
//
//	var stack *realstack.Stack
//
//	func TestMain(m *testing.M) { os.Exit(realstack.Run(m, &stack)) }
func Run(m *testing.M, s **Stack) int {
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	begin := time.Now()
	started, err := Start(ctx)
	stopSignals()
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "realstack: starting the stack: %v\n", err)
		return 1
	}
	// For whoever reads the log; nothing asserts it.
	fmt.Fprintf(os.Stderr, "realstack: stack up in %s\n", time.Since(begin).Round(100*time.Millisecond))
	*s = started

	done := make(chan struct{})
	go func() {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(sigs)
		select {
		case sig := <-sigs:
			fmt.Fprintf(os.Stderr, "realstack: %v: stopping the stack\n", sig)
			_ = started.Stop()
			os.Exit(1)
		case <-done:
		}
	}()
	code := m.Run()
	close(done)
	if code != 0 {
		started.KeepLogs = true
	}
	if err := started.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "realstack: stopping the stack: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
