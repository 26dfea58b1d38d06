package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// newTektonControllerCommand starts the Tekton custom task controller (plugin/tekton).
func newTektonControllerCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "tekton-controller",
		Short: "Run the Tekton CustomRun controller (not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("the Tekton custom task controller is not built yet")
		},
	}
}
