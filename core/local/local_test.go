package local

import (
	"os"
	"path/filepath"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/trainjob"
)

func TestInjectedEnvMatchesTheTrainerPlugins(t *testing.T) {
	assert.Equal(t, map[string]string{"PET_NNODES": "3", "PET_NPROC_PER_NODE": "2", "PET_NODE_RANK": "1", "PET_MASTER_ADDR": "127.0.0.1", "PET_MASTER_PORT": "29500"},
		InjectedEnv(runtimes.PolicyTorch, 1, 3, 2, "127.0.0.1", 29500))
	assert.Equal(t, map[string]string{"JAX_NUM_PROCESSES": "3", "JAX_PROCESS_ID": "2", "JAX_COORDINATOR_ADDRESS": "127.0.0.1:1234"},
		InjectedEnv(runtimes.PolicyJAX, 2, 3, 1, "127.0.0.1", 1234))
	assert.Equal(t, map[string]string{"DMLC_TRACKER_URI": "h", "DMLC_TRACKER_PORT": "9", "DMLC_TASK_ID": "0", "DMLC_NUM_WORKER": "2"},
		InjectedEnv(runtimes.PolicyXGBoost, 0, 2, 1, "h", 9))
	assert.Nil(t, InjectedEnv(runtimes.PolicyPlain, 0, 1, 1, "h", 9))
}

func TestLocalMPIUsesALocalHostfile(t *testing.T) {
	dir := t.TempDir()
	cmd, err := localMPI([]string{"mpirun", "--hostfile", "/etc/mpi/hostfile", "bash", "-c", "script"}, dir, 4)
	require.NoError(t, err)
	assert.Equal(t, "mpirun", cmd[0])
	assert.Equal(t, []string{"-np", "4"}, cmd[1:3])
	assert.Contains(t, cmd, filepath.Join(dir, "hostfile"))
	assert.NotContains(t, cmd, "/etc/mpi/hostfile")
	assert.Equal(t, []string{"bash", "-c", "script"}, cmd[len(cmd)-3:])
	b, err := os.ReadFile(filepath.Join(dir, "hostfile"))
	require.NoError(t, err)
	assert.Equal(t, "localhost slots=4\n", string(b))
}

// Three nodes of a plain-python runtime: each sees its rank, the first to fail is blamed (not
// the nodes stopped because of it), and its log tail explains the failure.
func TestRunBlamesTheFirstFailingNode(t *testing.T) {
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "local"}, Spec: trainer.TrainJobSpec{Trainer: &trainer.Trainer{
		NumNodes: ptr.To[int32](3),
		// Ranks 0 and 1 say hello and mark it in the shared parent directory; rank 2 waits for the
		// marks, then fails, and the others are stopped mid-sleep.
		Command: []string{"bash", "-c", `echo "rank $JAX_PROCESS_ID of $JAX_NUM_PROCESSES"; touch ../ready-$JAX_PROCESS_ID
if [ "$JAX_PROCESS_ID" = 2 ]; then until [ -e ../ready-0 ] && [ -e ../ready-1 ]; do :; done; echo "disk full" >&2; exit 7; fi
exec sleep 30`},
	}}}
	rt := &runtimes.Runtime{Name: "jax-distributed", Policy: runtimes.PolicyJAX, NumNodes: 1}
	res, err := (&Runner{}).Run(t.Context(), tj, rt)
	require.NoError(t, err)
	require.Len(t, res.Nodes, 3)
	assert.Equal(t, 2, res.Culprit)
	assert.Equal(t, 7, res.Nodes[2].ExitCode)
	assert.Contains(t, res.Nodes[0].Log, "rank 0 of 3")
	obs := res.Observe()
	assert.Equal(t, trainjob.PhaseFailed, obs.Phase)
	assert.Contains(t, obs.Message, "node-2 exited with code 7")
	assert.Contains(t, obs.Message, "last lines of node-2:\nrank 2 of 3\ndisk full")
	assert.Equal(t, "code", obs.Outputs()[trainjob.OutFailureClass], "a process that exited non-zero is the code's")
	assert.Equal(t, "false", obs.Outputs()[trainjob.OutRetryable])
}

func TestRunWithoutACommandSaysSo(t *testing.T) {
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "job"}, Spec: trainer.TrainJobSpec{Trainer: &trainer.Trainer{Image: ptr.To("ghcr.io/me/t:1")}}}
	_, err := (&Runner{}).Run(t.Context(), tj, &runtimes.Runtime{Name: "torch-distributed", Policy: runtimes.PolicyTorch, NumNodes: 1})
	assert.ErrorContains(t, err, "the local backend runs commands, not images")
}

// Without numProcPerNode, the processes per node are what the Trainer's plugins derive from the
// node's resources (realstack's TestLocalBackendMatchesTheRealTrainer compares with the real one).
func TestLayoutSizesNodesAsTheTrainerDoes(t *testing.T) {
	torch := &runtimes.Runtime{Policy: runtimes.PolicyTorch, NumNodes: 1, Command: []string{"torchrun"}}
	mpi := &runtimes.Runtime{Policy: runtimes.PolicyMPI, NumNodes: 1, MPINumProcPerNode: ptr.To[int32](1), Command: []string{"mpirun"}}
	res := func(name corev1.ResourceName, n string) *corev1.ResourceRequirements {
		return &corev1.ResourceRequirements{Limits: corev1.ResourceList{name: resource.MustParse(n)}}
	}
	for name, c := range map[string]struct {
		rt   *runtimes.Runtime
		tr   trainer.Trainer
		env  string
		want string
	}{
		"torch, nothing asked":   {torch, trainer.Trainer{NumNodes: ptr.To[int32](2)}, "PET_NPROC_PER_NODE", "1"},
		"torch, 2.5 CPUs":        {torch, trainer.Trainer{ResourcesPerNode: res(corev1.ResourceCPU, "2500m")}, "PET_NPROC_PER_NODE", "3"},
		"torch, 2 GPUs (auto)":   {torch, trainer.Trainer{ResourcesPerNode: res("nvidia.com/gpu", "2")}, "PET_NPROC_PER_NODE", "2"},
		"torch, numProcPerNode":  {torch, trainer.Trainer{NumProcPerNode: ptr.To[int32](4), ResourcesPerNode: res("nvidia.com/gpu", "2")}, "PET_NPROC_PER_NODE", "4"},
		"mpi, 2 GPUs, 1 slot":    {mpi, trainer.Trainer{ResourcesPerNode: res("nvidia.com/gpu", "2")}, "OMPI_MCA_orte_set_default_slots", "2"},
		"mpi, CPUs do not count": {mpi, trainer.Trainer{ResourcesPerNode: res(corev1.ResourceCPU, "4")}, "OMPI_MCA_orte_set_default_slots", "1"},
	} {
		t.Run(name, func(t *testing.T) {
			tj := &trainer.TrainJob{Spec: trainer.TrainJobSpec{Trainer: &c.tr}}
			nodes := Layout(tj, c.rt, "h", 1)
			require.NotEmpty(t, nodes)
			assert.Equal(t, c.want, nodes[0].Env[c.env])
		})
	}
}

func TestSecretEnvKeepsThisMachinesValue(t *testing.T) {
	t.Setenv("HF_TOKEN", "from-the-shell")
	own := []corev1.EnvVar{{Name: "MODE", Value: "fast"}, {Name: "HF_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "token"}}},
		{Name: "UNSET_SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "x"}}}}
	env := nodeEnv(&runtimes.Runtime{Policy: runtimes.PolicyPlain}, own, 0, 1, 1, 0, t.TempDir(), "")
	assert.Contains(t, env, "MODE=fast")
	assert.Contains(t, env, "HF_TOKEN=from-the-shell", "a Secret key is not readable here; the shell's value stays")
	for _, kv := range env {
		assert.NotEqual(t, "UNSET_SECRET=", kv, "no empty stand-in for a Secret key")
	}
}
