package cli

import (
	"fmt"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/plugin/argo"
)

// newArgoJanitorCommand runs the Argo face's cluster-level janitor (plugin/argo Janitor).
func newArgoJanitorCommand() *cobra.Command {
	var c controllerFlags
	cmd := &cobra.Command{
		Use:   "argo-janitor",
		Short: "Delete trainstep TrainJobs whose Argo node or Workflow has finished (the agent pod that would have is gone)",
		Long: `Run once per cluster beside Argo (manifests/argo/janitor.yaml). The plugin lives in each
workflow's agent pod; when that pod is evicted or its node dies, Argo fails the plugin's nodes and
a retryStrategy starts the next attempt while the old TrainJob trains on. The janitor deletes every
unfinished trainstep TrainJob whose Argo node is finished or whose Workflow is stopping or done.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c.setLogger(cmd.ErrOrStderr())
			cfg, err := c.restConfig()
			if err != nil {
				return err
			}
			cfg.UserAgent = argo.JanitorName
			scheme, err := trainjob.NewScheme(wfv1.AddToScheme)
			if err != nil {
				return err
			}
			cacheOpts := cache.Options{
				// Nothing cached (Workflows, TrainJobs) keeps its managedFields.
				DefaultTransform: trainjob.StripManagedFields,
				ByObject: map[client.Object]cache.ByObject{
					&trainer.TrainJob{}: {Label: argo.JanitorSelector()},
				},
			}
			if len(c.namespaces) > 0 {
				cacheOpts.DefaultNamespaces = map[string]cache.Config{}
				for _, ns := range c.namespaces {
					cacheOpts.DefaultNamespaces[ns] = cache.Config{}
				}
			}
			mgr, err := ctrl.NewManager(cfg, ctrl.Options{
				Scheme:                        scheme,
				Cache:                         cacheOpts,
				Metrics:                       metricsserver.Options{BindAddress: c.metricsAddr},
				HealthProbeBindAddress:        c.probeAddr,
				LeaderElection:                c.leaderElect,
				LeaderElectionID:              argo.JanitorName,
				LeaderElectionNamespace:       c.leaderElectionNamespace,
				LeaderElectionReleaseOnCancel: true,
			})
			if err != nil {
				return fmt.Errorf("creating the janitor's manager: %w", err)
			}
			if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
				return err
			}
			if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
				return err
			}
			if err := argo.SetupJanitor(mgr); err != nil {
				return err
			}
			return run(cmd.Context(), mgr, "Argo janitor")
		},
	}
	c.bind(cmd.Flags(), "127.0.0.1:8080")
	return cmd
}
