package realstack_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/core/trainers"
	"github.com/trainstep/trainstep/test/internal/realstack"
)

// pod.envFrom follows Kubernetes' precedence in the container the real Trainer makes. kwok runs
// no command, so the test plays the kubelet for the node container: the image's ENV first, the
// container's own env (as the Trainer wrote it) over it, the objects mounted where the pod mounts
// them, and the container's command run in real bash. envFrom must override the image's ENV and
// what the shell sets (HOSTNAME); only the container's own env wins; among sources the last wins.
func TestEnvFromFollowsKubernetesPrecedence(t *testing.T) {
	ns := stack.Namespace(t)
	ctx := t.Context()
	secret := map[string]string{"FROM_IMAGE": "from the secret", "OWN": "from the secret", "HOSTNAME": "from the secret", "SHARED": "from the secret"}
	config := map[string]string{"SHARED": "from the configmap"}
	require.NoError(t, stack.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: ns}, StringData: secret}))
	require.NoError(t, stack.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}, Data: config}))

	r := executor(t, ns, `
framework: xgboost
trainer:
  numNodes: 1
  env: {OWN: "from trainer.env", KWOK_RUN_SECONDS: "1"}
  func: |
    def train():
        import os
        return {k: os.environ.get(k) for k in ["FROM_IMAGE", "OWN", "HOSTNAME", "SHARED"]}
pod:
  envFrom: [{secretRef: {name: creds}}, {configMapRef: {name: settings}}]
timeout: 3m
`)
	if !hasRuntime("xgboost-distributed") || installedAPI(t).PodMechanism == "" {
		// The step needs the XGBoost runtime (v2.2+) and a pod-template mechanism (v2.1+).
		realstack.Lacks(t, "Trainer %s lacks the XGBoost runtime or a pod-template mechanism this step needs: trainstep refuses it by name at plan time (exit 2)", trainerRelease(t))
		refusedAtPlan(t, ns, r)
		return
	}
	pods := podsOfSucceededStep(t, ns, r, 1)
	var node corev1.Container
	for _, c := range pods[0].Spec.Containers {
		if c.Name == "node" {
			node = c
		}
	}
	require.NotEmpty(t, node.Command, "the Trainer's node container")

	root := t.TempDir()
	for i, data := range []map[string]string{secret, config} {
		dir := filepath.Join(root, "env-from", strconv.Itoa(i))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		for k, v := range data {
			require.NoError(t, os.WriteFile(filepath.Join(dir, k), []byte(v), 0o644))
		}
	}
	bin := filepath.Join(root, "bin")
	require.NoError(t, os.Mkdir(bin, 0o755))
	python, err := exec.LookPath("python3")
	require.NoError(t, err)
	require.NoError(t, os.Symlink(python, filepath.Join(bin, "python")))
	resultFile := filepath.Join(root, "result")

	// The image's ENV, then the container's own env over it, as the kubelet builds it.
	env := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "HOME=" + root, "FROM_IMAGE=from the image", "OWN=from the image", "HOSTNAME=" + pods[0].Name}
	for _, e := range node.Env {
		if e.ValueFrom == nil {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	env = append(env, trainers.EnvFromDirEnv+"="+filepath.Join(root, "env-from"), trainers.ResultFileEnv+"="+resultFile)
	cmd := exec.CommandContext(ctx, node.Command[0], append(node.Command[1:], node.Args...)...)
	cmd.Dir, cmd.Env = root, env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the node container's command in bash:\n%s", out)

	b, err := os.ReadFile(resultFile)
	require.NoError(t, err)
	var msg map[string]map[string]string
	require.NoError(t, json.Unmarshal(b, &msg), string(b))
	assert.Equal(t, map[string]string{
		"FROM_IMAGE": "from the secret",
		"OWN":        "from trainer.env",
		"HOSTNAME":   "from the secret",
		"SHARED":     "from the configmap",
	}, msg[trainers.ResultMarker])
}
