package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/runtimes/stock"
	"github.com/trainstep/trainstep/core/trainers"
)

func newRuntimesCommand() *cobra.Command {
	k := kubeFlags{offCluster: "--stock for the runtimes built into this binary"}
	var fromStock bool
	cmd := &cobra.Command{
		Use:   "runtimes",
		Short: "List the training runtimes a step can use, with their framework and trainer type",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var src runtimes.Source = stock.Source{}
			if !fromStock {
				cfg, err := k.restConfig()
				if err != nil {
					return err
				}
				c, err := newClient(cfg)
				if err != nil {
					return err
				}
				src = runtimes.ClusterSource{Reader: c}
			}
			cat, err := src.List(cmd.Context(), k.ns())
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tKIND\tFRAMEWORK\tTRAINER TYPE\tPOLICY\tNODES\tDEVICE\tNOTE")
			for _, r := range cat.Runtimes {
				note := ""
				if r.Deprecated {
					note = "deprecated"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.Name, r.Kind, r.Framework, r.Type, r.Policy, r.NumNodes, device(r), note)
			}
			for _, s := range cat.Skipped {
				fmt.Fprintf(w, "%s\t%s\t-\t-\t-\t-\t-\tskipped: %s\n", s.Name, s.Kind, s.Reason)
			}
			return w.Flush()
		},
	}
	f := cmd.Flags()
	f.BoolVar(&fromStock, "stock", false, "list the stock runtimes shipped in this binary instead of the cluster's")
	k.bind(f)
	k.bindNamespace(f, "", "the namespace whose TrainingRuntimes are listed too")
	return cmd
}

func device(r runtimes.Runtime) string {
	if r.Device == "Unknown" {
		return "-"
	}
	return r.Device + "×" + r.DeviceCount
}

func newTrainersCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "trainers",
		Short: "List the trainer kinds and the frameworks that pick them",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "KIND\tFRAMEWORK\tWHAT")
			for _, reg := range trainers.Builtin().Kinds() {
				fw := strings.Join(reg.Frameworks, ",")
				if fw == "" {
					fw = "(trainer.kind)"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\n", reg.Kind, fw, reg.Summary)
			}
			return w.Flush()
		},
	}
}
