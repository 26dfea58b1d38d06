package testenv

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// startTimeout bounds Start in Run: a start takes 6-10 s, but a busy 2-core CI machine with a
// cold module cache can take much longer, and a hang should still end with an error.
const startTimeout = 3 * time.Minute

// Run is the body of a suite's TestMain: it starts an Env with opts into *env, runs the tests,
// stops the Env and returns the exit code for os.Exit. If the Env does not start, it prints
// why (naming `make test-assets` when binaries are missing) and returns 1: integration tests
// fail rather than skip without a control plane.
//
//	var env *testenv.Env
//
//	func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env, testenv.Options{})) }
//
// Each setup runs once the control plane is up (start the Trainer simulator, build clients); its
// ctx ends after the tests, before the control plane stops. A setup error fails the suite.
func Run(m *testing.M, env **Env, opts Options, setup ...func(ctx context.Context, env *Env) error) int {
	// TestMain has no context of its own; this one bounds the start and ends it on Ctrl-C.
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	started, err := Start(ctx, opts)
	stopSignals()
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: starting the control plane: %v\n", err)
		return 1
	}
	*env = started

	testsDone := make(chan struct{})
	go stopOnSignal(started, testsDone)
	suite, endSuite := context.WithCancel(context.Background())
	code := 0
	for _, s := range setup {
		if err := s(suite, started); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: setting up the suite: %v\n", err)
			code = 1
			break
		}
	}
	if code == 0 {
		code = m.Run()
	}
	endSuite()
	close(testsDone)

	if err := started.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stopping the control plane: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// stopOnSignal stops env and exits if the test binary is interrupted before testsDone closes.
// Otherwise etcd and kube-apiserver would outlive it: envtest starts them in a process group
// of their own, so a Ctrl-C or CI's SIGTERM does not reach them.
func stopOnSignal(env *Env, testsDone <-chan struct{}) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	select {
	case sig := <-sigs:
		signal.Stop(sigs)
		fmt.Fprintf(os.Stderr, "testenv: %v: stopping the control plane\n", sig)
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: stopping the control plane: %v\n", err)
		}
		os.Exit(1)
	case <-testsDone:
		signal.Stop(sigs)
	}
}

// QuietLogs keeps controller-runtime's and client-go's logs out of test output unless TEST_LOG is
// set. Call it first in TestMain: envtest complains when no logger was ever set.
func QuietLogs() {
	if os.Getenv("TEST_LOG") != "" {
		l := funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{})
		ctrllog.SetLogger(l)
		klog.SetLogger(l)
		return
	}
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
}
