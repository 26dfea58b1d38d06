package cli

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/trainstep/trainstep/plugin/argo"
)

// newArgoPluginCommand starts the Argo Workflows executor plugin (plugin/argo). Flags map to
// argo.Options; the plugin does the rest.
func newArgoPluginCommand() *cobra.Command {
	var k kubeFlags
	var o argo.Options
	cmd := &cobra.Command{
		Use:   "argo-plugin",
		Short: "Serve the Argo Workflows executor plugin (the sidecar of Argo's agent pod)",
		Long: `Serve POST /api/v1/template.execute for templates with plugin: {trainstep: {...}}, plus
/healthz, /readyz and /metrics. Runs as the sidecar Argo injects into each workflow's agent pod
(manifests/argo); see plugin/argo/README.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := k.restConfig()
			if err != nil {
				return err
			}
			o.Namespace = k.ns()
			handler := slog.NewJSONHandler(cmd.ErrOrStderr(), nil)
			o.Logger = slog.New(handler)
			// client-go and controller-runtime log through logr: the same JSON stream.
			ctrllog.SetLogger(logr.FromSlogHandler(handler))
			p, err := argo.New(cfg, o)
			if err != nil {
				return err
			}
			if err := p.Run(cmd.Context()); err != nil {
				return fmt.Errorf("the Argo executor plugin stopped: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	k.bind(f)
	k.bindNamespace(f, os.Getenv("POD_NAMESPACE"), "the namespace served, the agent pod's ($POD_NAMESPACE)")
	f.StringVar(&o.Workflow, "workflow", os.Getenv("ARGO_WORKFLOW_NAME"), "watch only this workflow (default $ARGO_WORKFLOW_NAME; empty watches every workflow of the namespace)")
	f.StringVar(&o.Addr, "addr", argo.DefaultAddr, "listen address; the first containerPort of the plugin's sidecar")
	f.StringVar(&o.MetricsAddr, "metrics-addr", argo.DefaultMetricsAddr, "where /metrics is served, unauthenticated (loopback by default; \""+argo.MetricsOff+"\": none)")
	f.StringVar(&o.TokenFile, "token-file", argo.DefaultTokenFile, "the agent's bearer token file, re-read when it changes")
	f.StringVar(&o.Key, "key", argo.DefaultKey, "the plugin key of the templates to answer: plugin: {<key>: {...}}")
	f.DurationVar(&o.HoldMax, "hold-max", argo.DefaultHoldMax, "hold an execute call open up to this long waiting for the TrainJob to finish (0: never; max 25s)")
	f.IntVar(&o.MaxHeld, "max-held", argo.DefaultMaxHeld, "hold at most this many calls at once (the agent has 16 task workers by default)")
	f.DurationVar(&o.Requeue, "requeue", argo.DefaultRequeue, "how soon the agent calls again about an unfinished step")
	f.Int64Var(&o.MaxBody, "max-body", argo.DefaultMaxBody, "largest request body accepted, in bytes")
	f.Float32Var(&o.QPS, "kube-api-qps", argo.DefaultQPS, "requests per second to the apiserver")
	f.IntVar(&o.Burst, "kube-api-burst", argo.DefaultBurst, "request burst to the apiserver")
	return cmd
}
