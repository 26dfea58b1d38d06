package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/trainstep/trainstep/internal/managed"
)

// controllerFlags are the flags every long-running controller command shares (the Tekton
// controller, the Argo janitor), worded the same in each.
type controllerFlags struct {
	kubeFlags
	namespaces              []string
	metricsAddr, probeAddr  string
	pprofAddr               string
	leaderElect             bool
	leaderElectionNamespace string
	logFormat               string
}

func (c *controllerFlags) bind(f *pflag.FlagSet, metricsDefault string) {
	c.kubeFlags.bind(f)
	f.StringSliceVar(&c.namespaces, "namespaces", nil, "watch only these namespaces (default: all)")
	f.StringVar(&c.metricsAddr, "metrics-bind-address", metricsDefault, "address of /metrics (0 turns it off)")
	f.StringVar(&c.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz (0 turns them off)")
	f.StringVar(&c.pprofAddr, "pprof-bind-address", "", "address of Go's /debug/pprof profiles, unauthenticated (default: none)")
	f.BoolVar(&c.leaderElect, "leader-elect", false, "elect a leader so only one replica acts")
	f.StringVar(&c.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's)")
	f.StringVar(&c.logFormat, "log-format", "json", "log format: json or text")
}

// managed is the flags as the options of a controller named name.
func (c *controllerFlags) managed(name string) managed.Options {
	return managed.Options{Name: name, Namespaces: c.namespaces, MetricsAddr: c.metricsAddr, ProbeAddr: c.probeAddr, PprofAddr: c.pprofAddr,
		LeaderElection: c.leaderElect, LeaderElectionNamespace: c.leaderElectionNamespace}
}

// config sends controller-runtime's and client-go's logs to w in the chosen format and loads
// the cluster config, its requests named for the controller.
func (c *controllerFlags) config(w io.Writer, name string) (*rest.Config, error) {
	ctrl.SetLogger(zap.New(zap.UseDevMode(c.logFormat == "text"), zap.WriteTo(w)))
	cfg, err := c.restConfig()
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = name
	return cfg, nil
}

// run starts a manager and runs it until ctx ends.
func run(ctx context.Context, mgr manager.Manager, what string) error {
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running the %s: %w", what, err)
	}
	return nil
}
