// Package managed builds the controller-runtime managers of trainstep's long-running
// controllers (the Tekton controller, the Argo janitor) one way: the namespaces watched,
// metrics, probes (ready once the informers have synced) and leader election.
package managed

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/trainstep/trainstep/internal/restmapping"
)

// Options are what every controller of trainstep's sets the same way.
type Options struct {
	// Name is the leader-election Lease's name.
	Name string
	// Namespaces limits what is watched; empty means all.
	Namespaces []string
	// MetricsAddr and ProbeAddr serve /metrics and /healthz, /readyz ("0" turns one off).
	MetricsAddr, ProbeAddr string
	// PprofAddr serves Go's /debug/pprof profiles ("" or "0": none, the default). A heap
	// profile with ?gc=1 says what the process holds live, apart from garbage not yet collected.
	PprofAddr string
	// LeaderElection makes only one replica act; the Lease is in LeaderElectionNamespace
	// (default: the pod's).
	LeaderElection          bool
	LeaderElectionNamespace string
}

// New builds a manager with the cache c (its namespaces set from o), probes and leader election.
func New(cfg *rest.Config, scheme *runtime.Scheme, c cache.Options, o Options) (manager.Manager, error) {
	if len(o.Namespaces) > 0 {
		c.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range o.Namespaces {
			c.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Cache:                         c,
		MapperProvider:                restmapping.NewDynamic, // the cache asks it on every read
		Metrics:                       metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:        o.ProbeAddr,
		PprofBindAddress:              o.PprofAddr,
		LeaderElection:                o.LeaderElection,
		LeaderElectionID:              o.Name,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		// Tests run several managers of one controller in one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the %s manager: %w", o.Name, err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding /healthz: %w", err)
	}
	if err := mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("informer caches have not synced")
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("adding /readyz: %w", err)
	}
	return mgr, nil
}
