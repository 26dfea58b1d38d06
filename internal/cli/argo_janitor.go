package cli

import (
	"github.com/spf13/cobra"

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
unfinished trainstep TrainJob whose Argo node is finished (under a retryStrategy, its attempt's
node <step>(N), not the Retry node above it) or whose Workflow is stopping or done, except one kept
past its timeout by keepOnTimeout. It also counts the steps that ended, from their Workflow nodes,
for Prometheus on /metrics (--metrics-bind-address; the manifests serve it on :8080): the series
docs/cost.md lists.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := c.config(cmd.ErrOrStderr(), argo.JanitorName)
			if err != nil {
				return err
			}
			mgr, err := argo.NewJanitor(cfg, c.managed(argo.JanitorName), nil)
			if err != nil {
				return err
			}
			return run(cmd.Context(), mgr, "Argo janitor")
		},
	}
	c.bind(cmd.Flags(), "127.0.0.1:8080")
	return cmd
}
