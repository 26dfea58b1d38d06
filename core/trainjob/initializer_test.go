package trainjob

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/core/step"
)

// Both shapes of secretRef reach the TrainJob as the same LocalObjectReference.
func TestInitializerSecretRefShapes(t *testing.T) {
	for name, ref := range map[string]string{"a name": "hf-token", "the TrainJob's shape": "{name: hf-token}"} {
		t.Run(name, func(t *testing.T) {
			s, err := step.Parse([]byte("framework: torchtune\ntrainer: {}\ninitializer:\n  dataset: {storageUri: 'hf://d', secretRef: " + ref + "}\n  model: {storageUri: 'hf://m'}\n"))
			require.NoError(t, err)
			in := initializer(s.Initializer)
			assert.Equal(t, &corev1.LocalObjectReference{Name: "hf-token"}, in.Dataset.SecretRef)
			assert.Nil(t, in.Model.SecretRef)
		})
	}
}
