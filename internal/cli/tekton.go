package cli

import (
	"github.com/spf13/cobra"

	"github.com/trainstep/trainstep/plugin/tekton"
)

// newTektonControllerCommand starts the Tekton custom task controller (plugin/tekton).
func newTektonControllerCommand() *cobra.Command {
	var (
		c    controllerFlags
		opts tekton.Options
	)
	cmd := &cobra.Command{
		Use:   "tekton-controller",
		Short: "Run the Tekton CustomRun controller: PipelineTasks naming " + tekton.APIVersion + " " + tekton.Kind + " run as TrainJobs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := c.config(cmd.ErrOrStderr(), tekton.Name)
			if err != nil {
				return err
			}
			opts.Namespaces, opts.MetricsAddr, opts.ProbeAddr, opts.PprofAddr = c.namespaces, c.metricsAddr, c.probeAddr, c.pprofAddr
			opts.LeaderElection, opts.LeaderElectionNamespace = c.leaderElect, c.leaderElectionNamespace
			mgr, err := tekton.New(cfg, opts)
			if err != nil {
				return err
			}
			return run(cmd.Context(), mgr, "Tekton controller")
		},
	}
	f := cmd.Flags()
	c.bind(f, ":8080")
	f.IntVar(&opts.Workers, "workers", 8, "CustomRuns reconciled at once")
	f.Float32Var(&opts.QPS, "kube-api-qps", 50, "requests per second to the apiserver")
	f.IntVar(&opts.Burst, "kube-api-burst", 100, "request burst to the apiserver")
	return cmd
}
