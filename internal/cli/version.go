package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/trainstep/trainstep/internal/version"
)

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, Go version and the Trainer, Argo and Tekton API versions built in",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := version.Get()
			switch output {
			case "":
				return info.Write(cmd.OutOrStdout())
			case "json":
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			default:
				return fmt.Errorf("--output %q: use json, or leave it out for text", output)
			}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json for a machine; text when empty")
	return cmd
}
