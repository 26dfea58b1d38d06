// Package argo_test runs the Argo face end to end with Argo's own code: the pinned
// workflow-controller runs as a local process against the test apiserver, creates the agent pod
// of each workflow, and since no kubelet exists a fixture runs that pod's `argoexec agent`
// containers (init, then main) as local processes with the pod's own env, beside the trainstep
// plugin (the real `executor argo-plugin` binary). The plugin and the agent authenticate as
// their ServiceAccounts from manifests/argo, so its RBAC is exercised too. The harness is
// test/internal/argoharness; the Trainer simulator stands in for the Trainer.
package argo_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/trainstep/trainstep/test/internal/argoharness"
	"github.com/trainstep/trainstep/test/internal/testenv"
	"github.com/trainstep/trainstep/test/internal/trainersim"
)

// Namespace is where the harness's (namespaced) controller, the workflows and the plugin live:
// manifests/argo's own, which its ClusterRoleBindings name.
const Namespace = argoharness.Namespace

var (
	env     *testenv.Env
	harness *argoharness.Harness
	c       client.Client
	// auditLog is the apiserver's audit log (audit_test.go), read by BenchmarkSideBySide.
	auditLog string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctrllog.SetLogger(logr.Discard())
	assets, err := argoharness.AssetsDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	auditDir, err := os.MkdirTemp("", "trainstep-e2e-argo-audit-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(auditDir)
	auditFlags, auditPath, err := auditArgs(auditDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	auditLog = auditPath
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start, stop := context.WithTimeout(ctx, 3*time.Minute)
	e, err := testenv.Start(start, testenv.Options{ControllerManager: true, CRDDirs: []string{argoharness.CRDDir(assets)}, APIServerArgs: auditFlags})
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the control plane:", err)
		return 1
	}
	env = e
	defer func() {
		cancel()
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	}()
	if _, err := trainersim.Start(ctx, env.Config, trainersim.ByLabel); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// $TRAINSTEP_ARGO_REQUEUE sets the controller's requeue time and the agent's patch rate
	// (make bench runs the side-by-side with Argo's default, 10s, and the harness's, 1s).
	var requeue time.Duration
	if v := os.Getenv("TRAINSTEP_ARGO_REQUEUE"); v != "" {
		if requeue, err = time.ParseDuration(v); err != nil {
			fmt.Fprintln(os.Stderr, "TRAINSTEP_ARGO_REQUEUE:", err)
			return 1
		}
	}
	// Another Argo suite may hold the machine's Argo lock for a while (argoharness).
	start, stop = context.WithTimeout(ctx, 20*time.Minute)
	harness, err = argoharness.Start(start, argoharness.Options{
		Kubeconfig: env.Kubeconfig, Config: env.Config, Scheme: env.Scheme, ReadyTimeout: testenv.Timeout, RequeueTime: requeue,
		// A client certificate for the ServiceAccount's user name: RBAC sees exactly it.
		ServiceAccountConfig: func(_ context.Context, ns, sa string) (*rest.Config, error) {
			return env.UserConfig("system:serviceaccount:"+ns+":"+sa, "system:serviceaccounts", "system:serviceaccounts:"+ns)
		},
	})
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer harness.Stop()
	c = harness.Client
	code := m.Run()
	if code != 0 {
		harness.DumpLogs(os.Stderr)
	}
	return code
}
