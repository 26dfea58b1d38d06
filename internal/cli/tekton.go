package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/trainstep/trainstep/plugin/tekton"
)

// newTektonControllerCommand starts the Tekton custom task controller (plugin/tekton).
func newTektonControllerCommand() *cobra.Command {
	var (
		kube      kubeFlags
		opts      tekton.Options
		zapOpts   zap.Options
		logFormat string
	)
	cmd := &cobra.Command{
		Use:   "tekton-controller",
		Short: "Run the Tekton CustomRun controller: PipelineTasks naming " + tekton.APIVersion + " " + tekton.Kind + " run as TrainJobs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			zapOpts.Development = logFormat == "text"
			ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts), zap.WriteTo(cmd.ErrOrStderr())))
			cfg, err := kube.restConfig()
			if err != nil {
				return err
			}
			cfg.UserAgent = tekton.Name
			mgr, err := tekton.New(cfg, opts)
			if err != nil {
				return err
			}
			if err := mgr.Start(cmd.Context()); err != nil {
				return fmt.Errorf("running the Tekton controller: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	kube.bind(f)
	f.StringVar(&opts.MetricsAddr, "metrics-bind-address", ":8080", "address of /metrics (0 turns it off)")
	f.StringVar(&opts.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz (0 turns them off)")
	f.BoolVar(&opts.LeaderElection, "leader-elect", false, "elect a leader so only one replica reconciles")
	f.StringVar(&opts.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's)")
	f.StringSliceVar(&opts.Namespaces, "namespaces", nil, "watch only these namespaces (default: all)")
	f.IntVar(&opts.Workers, "workers", 8, "CustomRuns reconciled at once")
	f.Float32Var(&opts.QPS, "kube-api-qps", 50, "requests per second to the apiserver")
	f.IntVar(&opts.Burst, "kube-api-burst", 100, "request burst to the apiserver")
	f.StringVar(&logFormat, "log-format", "json", "log format: json or text")
	return cmd
}
