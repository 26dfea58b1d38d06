// Package core_test proves the core against a real kube-apiserver with the real Trainer CRDs and
// stock runtimes, and the Trainer simulator in place of the Trainer controller.
package core_test

import (
	"context"
	"os"
	"testing"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/test/internal/testenv"
	"github.com/trainstep/trainstep/test/internal/trainersim"
)

var (
	env  *testenv.Env
	sim  *trainersim.Simulator
	kube kubernetes.Interface
	wc   client.WithWatch
)

func TestMain(m *testing.M) {
	testenv.QuietLogs()
	os.Exit(testenv.Run(m, &env, testenv.Options{ControllerManager: true}, func(ctx context.Context, e *testenv.Env) (err error) {
		if sim, err = trainersim.Start(ctx, e.Config, trainersim.ByLabel); err != nil {
			return err
		}
		if kube, err = kubernetes.NewForConfig(e.Config); err != nil {
			return err
		}
		wc, err = client.NewWithWatch(e.Config, client.Options{Scheme: e.Scheme})
		return err
	}))
}
