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
func Run(m *testing.M, s **Stack) int { return RunWith(m, s, nil) }

// SetUp runs once the stack is up, before the tests: it starts what a suite adds to the stack
// (an engine's controller, a face) and returns what stops it after the tests. ctx ends with the
// set-up; what it starts must outlive it.
type SetUp func(ctx context.Context, s *Stack) (tearDown func(), err error)

// SetUpTimeout bounds a suite's SetUp.
const SetUpTimeout = 10 * time.Minute

// RunWith is Run with a SetUp between the start of the stack and the tests; an error from it
// fails the suite (and keeps the stack's logs).
func RunWith(m *testing.M, s **Stack, setUp SetUp) int { return RunWithOptions(m, s, Options{}, setUp) }

// RunWithOptions is RunWith on a stack started with opts.
func RunWithOptions(m *testing.M, s **Stack, opts Options, setUp SetUp) int {
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	begin := time.Now()
	started, err := StartWith(ctx, opts)
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
	code := 1
	tearDown, err := runSetUp(started, setUp)
	if err != nil {
		fmt.Fprintf(os.Stderr, "realstack: setting up the suite: %v\n", err)
	} else {
		code = m.Run()
	}
	tearDown()
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

func runSetUp(s *Stack, setUp SetUp) (func(), error) {
	if setUp == nil {
		return func() {}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), SetUpTimeout)
	defer cancel()
	tearDown, err := setUp(ctx, s)
	if tearDown == nil {
		tearDown = func() {}
	}
	return tearDown, err
}
