package schema

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/core/trainers"
)

const file = "../../schemas/step.schema.json"

// The committed schema is what the Go types accept; regenerate with `make schema`.
func TestSchemaIsCurrent(t *testing.T) {
	got, err := Marshal(Step(trainers.Builtin()))
	require.NoError(t, err)
	if os.Getenv("UPDATE_SCHEMA") != "" {
		require.NoError(t, os.WriteFile(file, got, 0o644))
	}
	want, err := os.ReadFile(file)
	require.NoError(t, err, "run `make schema`")
	assert.Equal(t, string(want), string(got), "schemas/step.schema.json is stale: run `make schema`")
}

func TestSchemaCoversEveryTrainerField(t *testing.T) {
	s := Step(trainers.Builtin())
	tr := s["properties"].(map[string]any)["trainer"].(map[string]any)["properties"].(map[string]any)
	for _, k := range []string{"kind", "func", "funcName", "funcArgs", "numNodes", "resourcesPerNode", "image", "env",
		"packagesToInstall", "pipIndexUrls", "maxRestarts", "monitorInterval", "numProcPerNode", "deepspeedConfig",
		"command", "args", "dtype", "batchSize", "epochs", "loss", "config"} {
		assert.Contains(t, keys(tr), k)
	}
	top := s["properties"].(map[string]any)
	assert.Equal(t, []string{"annotations", "framework", "initializer", "keepOnTimeout", "labels", "queueName", "runtime", "runtimeConfig", "timeout", "trainer"}, keys(top))
	assert.Equal(t, false, s["additionalProperties"], "unknown keys are errors for editors too")
}
