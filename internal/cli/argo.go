package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// newArgoPluginCommand starts the Argo Workflows executor plugin (plugin/argo).
func newArgoPluginCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "argo-plugin",
		Short: "Serve the Argo Workflows executor plugin (not built yet)",
		RunE:  func(*cobra.Command, []string) error { return errors.New("the Argo executor plugin is not built yet") },
	}
}
