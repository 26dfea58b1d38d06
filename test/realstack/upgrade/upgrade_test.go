//go:build compat

// Package upgrade_test upgrades the real stack's Trainer and JobSet under a running step, the way
// a cluster admin does: the stack starts on REALSTACK_ASSETS (Trainer v2.2.1 with JobSet
// v0.11.1 in the compatibility matrix) and is upgraded to REALSTACK_UPGRADE_ASSETS (the pinned
// v2.3.0 with v0.12.0 unless set). It needs two releases' binaries, so it runs in `make
// test-compat` (the trainer@v2.2.1 row, build tag compat), not in `make test`.
package upgrade_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/test/internal/realstack"
)

var (
	stack *realstack.Stack
	bin   string
)

const (
	timeout  = 4 * time.Minute
	interval = 200 * time.Millisecond
)

func TestMain(m *testing.M) {
	os.Exit(realstack.RunWithExecutor(m, &stack, &bin, realstack.Options{}, nil))
}

// upgradeAssets is the release the stack is upgraded to.
func upgradeAssets() string {
	if d := os.Getenv("REALSTACK_UPGRADE_ASSETS"); d != "" {
		return d
	}
	_, assets := realstack.AssetDirs()
	return filepath.Join(filepath.Dir(assets), realstack.DefaultAssetsName)
}

// jobSet is an empty JobSet to read into: the stack's scheme holds the Trainer's types only.
func jobSet() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(jobsetv1alpha2.GroupVersion.WithKind("JobSet"))
	return u
}

// heldStep runs two nodes that stay Running until the test releases them (KWOK_HOLD).
const heldStep = `
framework: torch
trainer:
  numNodes: 2
  env: {KWOK_HOLD: "1"}
  func: |
    def train():
        print("training")
timeout: 6m
`

// TestTrainerUpgradeUnderARunningStep: a step is running (its pods held Running) when the
// Trainer and JobSet are upgraded to the next release: CRDs, webhooks, runtimes and managers
// replaced. The step finishes once: one TrainJob, the same one, whose JobSet and pods were not
// made again, and the executor ends Succeeded with its outputs. A step started after the
// upgrade runs on the new release.
func TestTrainerUpgradeUnderARunningStep(t *testing.T) {
	from, _, err := realstack.Release(stack.Assets)
	require.NoError(t, err)
	to, _, err := realstack.Release(upgradeAssets())
	require.NoError(t, err)
	require.NotEqual(t, from, to, "REALSTACK_UPGRADE_ASSETS must be another release than REALSTACK_ASSETS")
	ns := stack.Namespace(t)
	ctx := t.Context()

	run := stack.StartExecutor(t, bin, ns, heldStep, 10*time.Minute)
	var before []corev1.Pod
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		pods := &corev1.PodList{}
		require.NoError(c, stack.Client.List(ctx, pods, client.InNamespace(ns)))
		require.Len(c, pods.Items, 2)
		for _, p := range pods.Items {
			require.Equal(c, corev1.PodRunning, p.Status.Phase, "pod %s", p.Name)
		}
		before = pods.Items
	}, timeout, interval, "the step's two pods must run on %s", from)
	tjs := &trainer.TrainJobList{}
	require.NoError(t, stack.Client.List(ctx, tjs, client.InNamespace(ns)))
	require.Len(t, tjs.Items, 1)
	tj := tjs.Items[0]
	js := jobSet()
	require.NoError(t, stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tj.Name}, js))

	require.NoError(t, stack.UpgradeTrainer(ctx, upgradeAssets()), "upgrading %s to %s", from, to)
	require.False(t, run.Exited(), "the executor ended during the upgrade:\n%s", run.Stderr.String())

	require.NoError(t, stack.Release(ctx, ns, ""))
	r := run.Result(t)
	require.Equal(t, cli.ExitSucceeded, r.Code, "stderr:\n%s\nstdout:\n%s", r.Stderr, r.Stdout)
	assert.Equal(t, "Succeeded", r.Outputs["phase"])
	assert.Equal(t, tj.Name, r.Outputs["trainjob-name"])

	require.NoError(t, stack.Client.List(ctx, tjs, client.InNamespace(ns)))
	require.Len(t, tjs.Items, 1, "one TrainJob for the step")
	assert.Equal(t, tj.UID, tjs.Items[0].UID, "the TrainJob is the one made before the upgrade")
	after := jobSet()
	require.NoError(t, stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tj.Name}, after))
	assert.Equal(t, js.GetUID(), after.GetUID(), "the JobSet was not made again")
	pods := &corev1.PodList{}
	require.NoError(t, stack.Client.List(ctx, pods, client.InNamespace(ns)))
	uids := func(ps []corev1.Pod) []string {
		var out []string
		for _, p := range ps {
			out = append(out, string(p.UID))
		}
		return out
	}
	assert.ElementsMatch(t, uids(before), uids(pods.Items), "the pods were not made again")

	// The upgraded stack runs a new step on the new release.
	ns2 := stack.Namespace(t)
	next := stack.StartExecutor(t, bin, ns2, "framework: torch\ntrainer: {numNodes: 2, func: \"def train():\\n    pass\\n\"}\ntimeout: 3m\n", 5*time.Minute)
	r2 := next.Result(t)
	require.Equal(t, cli.ExitSucceeded, r2.Code, "a step after the upgrade; stderr:\n%s", r2.Stderr)
}
