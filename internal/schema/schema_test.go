package schema

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/trainstep/trainstep/core/trainers"
)

// schemas/step.schema.json being current is internal/generate's test; this one checks content.

func TestSchemaCoversEveryTrainerField(t *testing.T) {
	s := Step(trainers.Builtin())
	tr := s["properties"].(map[string]any)["trainer"].(map[string]any)["properties"].(map[string]any)
	for _, k := range []string{"kind", "func", "funcName", "funcArgs", "numNodes", "resourcesPerNode", "image", "env",
		"packagesToInstall", "pipIndexUrls", "maxRestarts", "monitorInterval", "numProcPerNode", "deepspeedConfig",
		"command", "args", "dtype", "batchSize", "epochs", "loss", "config"} {
		assert.Contains(t, keys(tr), k)
	}
	top := s["properties"].(map[string]any)
	assert.Equal(t, []string{"annotations", "apiVersion", "cache", "checkpoint", "framework", "hangTimeout", "initializer", "keepOnTimeout", "kind", "labels", "namePrefix", "pod", "queueName", "retry", "runtime", "runtimeConfig", "startTimeout", "timeout", "trainer"}, keys(top))
	assert.Equal(t, false, s["additionalProperties"], "unknown keys are errors for editors too")
}

func TestSchemaVolumesTakeEveryPodSourceButHostPath(t *testing.T) {
	s := Step(trainers.Builtin())
	pod := s["properties"].(map[string]any)["pod"].(map[string]any)["properties"].(map[string]any)
	vol := pod["volumes"].(map[string]any)["items"].(map[string]any)["properties"].(map[string]any)
	for _, k := range []string{"name", "persistentVolumeClaim", "secret", "configMap", "emptyDir", "csi", "nfs", "ephemeral", "projected", "downwardAPI", "image"} {
		assert.Contains(t, keys(vol), k)
	}
	assert.NotContains(t, keys(vol), "hostPath", "refused, so not offered")
}

// The checkpoint block: one of volume (with an optional path) or uri, as step.Checkpoint.Validate
// takes it.
func TestSchemaCheckpointTakesOneOfVolumeOrURI(t *testing.T) {
	s := compiled(t)
	const base = "framework: torch\ntrainer: {}\ncheckpoint: "
	for block, ok := range map[string]bool{
		"{volume: ckpt}":                  true,
		"{volume: ckpt, path: runs/a}":    true,
		"{uri: 's3://bucket/p'}":          true,
		"{}":                              false,
		"{volume: ckpt, uri: 's3://b/p'}": false,
		"{uri: 's3://b/p', path: x}":      false,
		"{volumes: ckpt}":                 false,
	} {
		err := s.Validate(instance(t, base+block))
		assert.Equal(t, ok, err == nil, "%s: %v", block, err)
	}
}

// runtime: the name alone, as the SDK's train(runtime=...) takes it, or {name, kind}, as the
// parser takes them.
func TestSchemaRuntimeTakesANameOrTheObject(t *testing.T) {
	s := compiled(t)
	const base = "framework: torch\ntrainer: {}\nruntime: "
	for runtime, ok := range map[string]bool{
		"torch-distributed":                                true,
		"{name: torch-distributed}":                        true,
		"{name: torch-distributed, kind: TrainingRuntime}": true,
		"{name: torch-distributed, kind: ClusterRuntime}":  false,
		"{name: torch-distributed, namespace: x}":          false,
		"3":                   false,
		"[torch-distributed]": false,
	} {
		err := s.Validate(instance(t, base+runtime))
		assert.Equal(t, ok, err == nil, "%s: %v", runtime, err)
	}
}
