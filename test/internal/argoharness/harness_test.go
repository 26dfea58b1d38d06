package argoharness

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAssetsDirRefusesWhatItsContainersCannotReach(t *testing.T) {
	for _, tc := range []struct {
		name, assets, want string
	}{
		{"unset", "", "ARGO_ASSETS is not set"},
		{"under /tmp", "/tmp/cold/trainstep/argo/v3.7.3", "is under /tmp"},
		{"/tmp itself", "/tmp", "is under /tmp"},
		{"missing files", "/nonexistent/argo/v3.7.3", "workflow-controller is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("ARGO_ASSETS", tc.assets)
			_, err := AssetsDir()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
