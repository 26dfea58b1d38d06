package realstack_test

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/local"
	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/realstack"
)

// Where the coordinator is differs by design: node 0's DNS name and port 29500 on the cluster,
// 127.0.0.1 and a free port locally; MPI's hostfile and ssh settings are replaced locally by a
// hostfile of this machine on mpirun's command line. Only these names may differ in value.
var addressEnv = map[string]bool{
	"PET_MASTER_ADDR": true, "PET_MASTER_PORT": true,
	"JAX_COORDINATOR_ADDRESS": true,
	"DMLC_TRACKER_URI":        true, "DMLC_TRACKER_PORT": true,
}

// mpiClusterOnly are what the MPI plugin sets for ssh between pods and the hostfile it mounts;
// the local backend passes its own hostfile to mpirun instead.
var mpiClusterOnly = map[string]bool{
	"OMPI_MCA_orte_default_hostfile": true, "OMPI_MCA_plm_rsh_args": true, "OMPI_MCA_orte_keep_fqdn_hostnames": true,
}

const completionIndexPath = "metadata.annotations['batch.kubernetes.io/job-completion-index']"

func gpus(c *corev1.Container) int {
	q := c.Resources.Limits["nvidia.com/gpu"]
	return int(q.Value())
}

func policyEnv(name string) bool {
	for _, p := range []string{"PET_", "JAX_", "DMLC_", "OMPI_"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// TestLocalBackendMatchesTheRealTrainer: for torch, jax, xgboost and mpi, the env the real
// Trainer puts on the node pods (read from the Pod objects, the rank through the downward API
// resolved to the pod's completion index) and their command are what core/local starts for the
// same TrainJob, addresses aside.
func TestLocalBackendMatchesTheRealTrainer(t *testing.T) {
	cases := []struct {
		name, step string
		// job is the replicated job whose pods run the trainer command.
		job string
		// known are differences reported and not fixed (see the case).
		known []string
	}{
		{name: "torch", job: "node", step: "framework: torch\ntrainer: {numNodes: 2, func: " + funcBody + "}"},
		{name: "torch with 3 CPUs", job: "node", step: "framework: torch\ntrainer: {numNodes: 2, resourcesPerNode: {cpu: 3}, func: " + funcBody + "}"},
		{name: "torch numProcPerNode", job: "node", step: "framework: torch\ntrainer: {numNodes: 2, numProcPerNode: 2, func: " + funcBody + "}"},
		{name: "torch with 2 GPUs", job: "node", step: "framework: torch\ntrainer: {numNodes: 2, resourcesPerNode: {gpu: 2}, func: " + funcBody + "}"},
		// The XGBoost plugin counts a worker per GPU; the local backend starts one process per
		// node, so a tracker told 4 would wait for workers that never come.
		{name: "xgboost with 2 GPUs", job: "node", step: "framework: xgboost\ntrainer: {numNodes: 2, resourcesPerNode: {gpu: 2}, func: " + funcBody + "}",
			known: []string{`node 0: DMLC_NUM_WORKER is "4" on the Trainer, "2" locally`, `node 1: DMLC_NUM_WORKER is "4" on the Trainer, "2" locally`}},
		{name: "mpi with 2 GPUs", job: "launcher", step: "framework: mpi\ntrainer: {numNodes: 2, resourcesPerNode: {gpu: 2}, func: " + funcBody + "}"},
		{name: "jax", job: "node", step: "framework: jax\ntrainer: {numNodes: 3, func: " + funcBody + "}"},
		{name: "xgboost", job: "node", step: "framework: xgboost\ntrainer: {numNodes: 2, func: " + funcBody + "}"},
		{name: "mpi", job: "launcher", step: "framework: mpi\ntrainer: {numNodes: 2, numProcPerNode: 2, func: " + funcBody + "}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ns := stack.Namespace(t)
			p, err := plan(t, ns, c.step)
			if err != nil && strings.Contains(err.Error(), "runtime: Required value: no runtime for") {
				// The release ships no runtime of the framework (v2.0 and v2.1: no JAX, no XGBoost).
				realstack.Lacks(t, "Trainer %s ships no runtime for the %s case: nothing to compare the local backend with; trainstep refuses the step by name (%v)", trainerRelease(t), c.name, err)
				return
			}
			require.NoError(t, err)
			id := trainjob.Identity{Engine: "realstack", OwnerUID: "local", StepKey: c.name}
			tj, _, err := trainjob.Submit(t.Context(), stack.Client, p.TrainJob(id), id)
			require.NoError(t, err)
			waitScheduled(t, ns, tj.Name, int(p.NumNodes()))

			pods := &corev1.PodList{}
			require.NoError(t, stack.Client.List(t.Context(), pods, client.InNamespace(ns),
				client.MatchingLabels{labelJobSet: tj.Name, labelReplicatedJob: c.job}))
			sort.Slice(pods.Items, func(i, j int) bool {
				return pods.Items[i].Annotations["batch.kubernetes.io/job-completion-index"] < pods.Items[j].Annotations["batch.kubernetes.io/job-completion-index"]
			})
			nodes := local.Layout(tj, &p.Runtime, "127.0.0.1", 29500)
			require.Len(t, pods.Items, len(nodes), "the local backend launches one process per trainer pod")
			var diffs []string
			for i, pod := range pods.Items {
				rank, err := strconv.Atoi(pod.Annotations["batch.kubernetes.io/job-completion-index"])
				require.NoError(t, err)
				require.Equal(t, i, rank)
				ci := slices.IndexFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == "node" })
				require.GreaterOrEqual(t, ci, 0, "pod %s has no container node", pod.Name)
				ctr := pod.Spec.Containers[ci]
				want := nodes[i]
				got := append(append([]string{}, ctr.Command...), ctr.Args...)
				if !slices.Equal(got, want.Command) {
					diffs = append(diffs, fmt.Sprintf("node %d command: Trainer %q, local %q", i, got, want.Command))
				}
				seen := map[string]bool{}
				for _, e := range ctr.Env {
					if !policyEnv(e.Name) {
						continue
					}
					seen[e.Name] = true
					v := e.Value
					if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == completionIndexPath {
						v = strconv.Itoa(rank) // the downward API's value on this pod
					} else if e.ValueFrom != nil {
						v = fmt.Sprintf("valueFrom %+v", *e.ValueFrom)
					}
					lv, ok := want.Env[e.Name]
					switch {
					case mpiClusterOnly[e.Name]:
					case !ok:
						diffs = append(diffs, fmt.Sprintf("node %d: the Trainer sets %s=%s, local does not", i, e.Name, v))
					case addressEnv[e.Name]:
					case e.Name == "PET_NPROC_PER_NODE" && v == "auto" && lv == strconv.Itoa(gpus(&ctr)):
						// torchrun resolves "auto" to the node's GPUs
					case lv != v:
						diffs = append(diffs, fmt.Sprintf("node %d: %s is %q on the Trainer, %q locally", i, e.Name, v, lv))
					}
				}
				for k := range want.Env {
					if policyEnv(k) && !seen[k] {
						diffs = append(diffs, fmt.Sprintf("node %d: local sets %s=%s, the Trainer does not", i, k, want.Env[k]))
					}
				}
			}
			if !pinnedRelease(t) && !slices.Equal(c.known, diffs) {
				// The local backend runs a step as the pinned Trainer would; an older release's
				// plugins set some values otherwise, which the table says.
				realstack.Lacks(t, "Trainer %s's plugins differ from the local backend, which follows the pinned release: %s", trainerRelease(t), strings.Join(diffs, "; "))
				return
			}
			assert.Equal(t, c.known, diffs, "the local backend differs from the real Trainer")
		})
	}
}
