package release

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const root = "../.."

func TestRender(t *testing.T) {
	const pinned = "registry.example/trainstep@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name, face, image string
		wantErr           string
		wantImages        int // lines naming the pinned image (the header names it once more)
	}{
		{name: "argo: the janitor and the plugin's ConfigMap", face: "argo", image: pinned, wantImages: 3},
		{name: "tekton: the controller", face: "tekton", image: pinned, wantImages: 2},
		{name: "a tag is refused", face: "argo", image: "registry.example/trainstep:v1", wantErr: "pins the image by digest"},
		{name: "an unknown face", face: "kfp", image: pinned, wantErr: "kustomize build manifests/kfp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Render(root, tc.face, tc.image)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.NotContains(t, string(b), DevImage)
			assert.Equal(t, tc.wantImages, strings.Count(string(b), pinned), "%s", b)
		})
	}
}
