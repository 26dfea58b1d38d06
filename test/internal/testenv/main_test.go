package testenv_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr/funcr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/trainstep/trainstep/test/internal/testenv"
)

// env runs the garbage collector too, so the tests below can prove kube-controller-manager works.
var env *testenv.Env

func TestMain(m *testing.M) {
	// envtest logs through controller-runtime; without a logger, a start later than 30 s into
	// the run prints a "log.SetLogger(...) was never called" stack trace instead.
	ctrllog.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{}))
	os.Exit(testenv.Run(m, &env, testenv.Options{ControllerManager: true}))
}
