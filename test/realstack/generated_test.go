package realstack_test

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainers"
	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/realstack"
)

// longStepKey is an Argo node name of a nested DAG with long names: the TrainJob name keeps its
// tail within trainjob.MaxNameLength.
const longStepKey = "nightly-finetune-pipeline-x7k2p.prepare-and-train.train-the-model-with-a-long-task-name"

// trainerBlock is a valid trainer block of each builtin kind, with numNodes n.
func trainerBlock(kind string, n int) string {
	switch kind {
	case "CustomTrainerContainer":
		return fmt.Sprintf("{kind: %s, image: busybox:1.37, command: [sh, -c, 'echo hi'], numNodes: %d}", kind, n)
	case "TorchTuneTrainer":
		return fmt.Sprintf("{kind: %s, epochs: 1, numNodes: %d}", kind, n)
	}
	return fmt.Sprintf("{kind: %s, func: %s, numNodes: %d}", kind, funcBody, n)
}

const generatedInitializer = `initializer:
  dataset: {storageUri: "hf://tatsu-lab/alpaca"}
  model: {storageUri: "hf://meta-llama/Llama-3.2-1B-Instruct"}
`

// TestGeneratedValidStepsAreAccepted: every builtin trainer kind on every stock runtime it
// accepts, with a long pipeline step key on 1 node and with 4 nodes (and initializers where the
// runtime has them), goes through trainstep's Plan and Submit: the Trainer webhook admits the
// TrainJob, the JobSet webhook admits the JobSet the Trainer makes, and kube-scheduler binds
// every pod. Steps trainstep refuses (torchtune 1B/3B on 4 nodes) must be refused for a reason
// the Trainer also has, and run on 1 node instead.
func TestGeneratedValidStepsAreAccepted(t *testing.T) {
	t.Parallel()
	type combo struct{ kind, runtime string }
	var combos []combo
	var mu sync.Mutex
	var table []string
	for _, reg := range trainers.Builtin().Kinds() {
		for _, rt := range stack.Runtimes {
			combos = append(combos, combo{reg.Kind, rt})
		}
	}
	// A release may ship no runtime of a kind's frameworks (v2.0 and v2.1: JAX, XGBoost); trainstep
	// then refuses its steps by name, and the kind may match nothing.
	lacking := map[string]bool{}
	for _, reg := range trainers.Builtin().Kinds() {
		if _, err := plan(t, "default", "trainer: "+trainerBlock(reg.Kind, 1)); err != nil && strings.Contains(err.Error(), "runtime: Required value: no runtime for "+reg.Kind) {
			realstack.Lacks(t, "Trainer %s ships no runtime for %s: trainstep refuses its steps by name (%v)", trainerRelease(t), reg.Kind, err)
			lacking[reg.Kind] = true
		}
	}
	matched := map[string]int{}
	for _, c := range combos {
		t.Run(c.kind+"/"+c.runtime, func(t *testing.T) {
			t.Parallel()
			base := "runtime: {name: " + c.runtime + "}\n"
			p, err := plan(t, "default", base+"trainer: "+trainerBlock(c.kind, 1))
			if err != nil {
				var inv *step.InvalidError
				require.True(t, errors.As(err, &inv), "%v", err)
				require.Equal(t, "runtime.name", inv.Errs[0].Field, "the only refusal expected on 1 node is a runtime mismatch: %v", err)
				return
			}
			mu.Lock()
			matched[c.kind]++
			mu.Unlock()
			ns := stack.Namespace(t)
			makeRuntimeClaims(t, ns, c.runtime)
			steps := map[string]string{longStepKey: base + "trainer: " + trainerBlock(c.kind, 1)}
			init := ""
			if p.Runtime.HasDatasetInitializer && p.Runtime.HasModelInitializer {
				init = generatedInitializer
			}
			four := base + init + "trainer: " + trainerBlock(c.kind, 4)
			if _, err := plan(t, ns, four); err != nil {
				var inv *step.InvalidError
				require.True(t, errors.As(err, &inv), "%v", err)
				require.Equal(t, "trainer.numNodes", inv.Errs[0].Field, "%v", err)
				require.Equal(t, "TorchTuneTrainer", c.kind, "only torchtune refuses 4 nodes: %v", err)
				steps["four-nodes"] = base + init + "trainer: " + trainerBlock(c.kind, 1)
			} else {
				steps["four-nodes"] = four
			}
			// Both TrainJobs first, then the waits: they run side by side.
			type submitted struct {
				name     string
				nodes    int32
				wantPods int
			}
			var jobs []submitted
			for key, yaml := range steps {
				p, err := plan(t, ns, yaml)
				require.NoError(t, err, yaml)
				id := trainjob.Identity{Engine: "realstack", OwnerUID: "generated", StepKey: key}
				tj := p.TrainJob(id)
				require.LessOrEqual(t, len(tj.Name), trainjob.MaxNameLength)
				created, _, err := trainjob.Submit(t.Context(), stack.Client, tj, id)
				require.NoError(t, err, "the Trainer webhook refused a step trainstep accepts:\n%s", yaml)
				want := int(p.NumNodes())
				for _, rj := range p.Runtime.ReplicatedJobs {
					if strings.HasSuffix(rj.Name, "-initializer") {
						want++
					}
				}
				jobs = append(jobs, submitted{created.Name, p.NumNodes(), want})
			}
			for _, j := range jobs {
				waitScheduled(t, ns, j.name, j.wantPods)
				mu.Lock()
				table = append(table, fmt.Sprintf("%s on %s, %d node(s), %d pods: %s", c.kind, c.runtime, j.nodes, j.wantPods, j.name))
				mu.Unlock()
			}
			assert.Len(t, jobs, 2)
		})
	}
	t.Cleanup(func() {
		sort.Strings(table)
		t.Logf("accepted and scheduled:\n%s", strings.Join(table, "\n"))
		for _, reg := range trainers.Builtin().Kinds() {
			if !lacking[reg.Kind] {
				assert.Positive(t, matched[reg.Kind], "%s matched no stock runtime", reg.Kind)
			}
		}
	})
}

var jobSetGVK = schema.GroupVersionKind{Group: "jobset.x-k8s.io", Version: "v1alpha2", Kind: "JobSet"}

// waitScheduled waits for the JobSet of TrainJob name (the JobSet webhook admitted it) and for
// at least want of its pods, every one with PodScheduled=True on a kwok Node. A refused JobSet shows as an
// Event on the TrainJob, which the failure carries.
func waitScheduled(t *testing.T, ns, name string, want int) {
	t.Helper()
	var last string
	ok := assert.Eventually(t, func() bool {
		js := &unstructured.Unstructured{}
		js.SetGroupVersionKind(jobSetGVK)
		if err := stack.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, js); err != nil {
			last = "no JobSet: " + err.Error()
			return false
		}
		pods := &corev1.PodList{}
		if err := stack.Client.List(t.Context(), pods, client.InNamespace(ns), client.MatchingLabels{labelJobSet: name}); err != nil {
			return false
		}
		scheduled := 0
		for _, p := range pods.Items {
			if podScheduled(&p) && slices.Contains(stack.Nodes, p.Spec.NodeName) {
				scheduled++
			}
		}
		last = fmt.Sprintf("%d of at least %d pods scheduled (%d pods)", scheduled, want, len(pods.Items))
		// At least: an MPI runtime adds a launcher, with or without a node of its own by node
		// count (mlx-distributed makes 2 pods for 1 node, 4 for 4); the exact layout of each
		// kind is TestEveryTrainerKindSucceedsOnTheRealStack's.
		return scheduled >= want && scheduled == len(pods.Items)
	}, 2*time.Minute, 500*time.Millisecond, "TrainJob %s/%s", ns, name)
	if !ok {
		evs := &corev1.EventList{}
		_ = stack.Client.List(t.Context(), evs, client.InNamespace(ns))
		var msgs []string
		for _, e := range evs.Items {
			msgs = append(msgs, e.InvolvedObject.Name+": "+e.Reason+": "+e.Message)
		}
		t.Fatalf("%s; events:\n%s", last, strings.Join(msgs, "\n"))
	}
}
