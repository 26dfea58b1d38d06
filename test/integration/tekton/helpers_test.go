package tekton_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// controller is one running Tekton face, watching one namespace.
type controller struct {
	Metrics *prometheus.Registry
	// Cache is the controller's informer cache: what it reads CustomRuns, TrainJobs, pods,
	// Events and Kueue's Workloads from, as it holds them.
	Cache cache.Cache
	stop  func()
}

// startController runs the controller until the test ends (or Stop).
func startController(t testing.TB, ns string, mutate ...func(*tekton.Options)) *controller {
	t.Helper()
	return startControllerAs(t, env.Config, ns, mutate...)
}

// startControllerAs runs the controller with the rights of cfg's user.
func startControllerAs(t testing.TB, cfg *rest.Config, ns string, mutate ...func(*tekton.Options)) *controller {
	t.Helper()
	reg := prometheus.NewRegistry()
	opts := tekton.Options{MetricsAddr: "0", ProbeAddr: "0", Namespaces: []string{ns}, Logs: sim.Logs, Registerer: reg}
	for _, m := range mutate {
		m(&opts)
	}
	mgr, err := tekton.New(cfg, opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				assert.NoError(t, err, "the controller stopped with an error")
			case <-time.After(testenv.Timeout):
				t.Error("the controller did not stop")
			}
		})
	}
	t.Cleanup(stop)
	return &controller{Metrics: reg, Cache: mgr.GetCache(), stop: stop}
}

func (c *controller) Stop() { c.stop() }

// customRun decodes a CustomRun strictly from YAML; {ns} becomes the namespace. Without
// apiVersion/kind in the YAML they are filled in.
func customRun(t testing.TB, ns, y string) *v1beta1.CustomRun {
	t.Helper()
	run := &v1beta1.CustomRun{}
	require.NoError(t, yaml.UnmarshalStrict([]byte(strings.ReplaceAll(y, "{ns}", ns)), run))
	run.APIVersion, run.Kind = v1beta1.GroupVersion.String(), "CustomRun"
	run.Namespace = ns
	return run
}

// ours is the customRef every trainstep CustomRun carries.
const ours = "customRef: {apiVersion: " + tekton.APIVersion + ", kind: " + tekton.Kind + "}\n"

func create(t testing.TB, run *v1beta1.CustomRun) *v1beta1.CustomRun {
	t.Helper()
	require.NoError(t, c.Create(t.Context(), run))
	return run
}

func get(t require.TestingT, ctx context.Context, ns, name string) *v1beta1.CustomRun {
	run := &v1beta1.CustomRun{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, run))
	return run
}

// waitRun waits until check passes on the stored run and returns it.
func waitRun(t *testing.T, ns, name string, check func(c *assert.CollectT, run *v1beta1.CustomRun)) *v1beta1.CustomRun {
	t.Helper()
	var last *v1beta1.CustomRun
	ok := assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		run := &v1beta1.CustomRun{}
		if !assert.NoError(ct, c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, run)) {
			return
		}
		last = run
		check(ct, run)
	}, testenv.Timeout, testenv.Interval, "CustomRun %s/%s", ns, name)
	if !ok {
		t.Fatalf("CustomRun %s/%s never got there; last status:\n%s", ns, name, describe(last))
	}
	return last
}

func describe(run *v1beta1.CustomRun) string {
	if run == nil {
		return "nothing"
	}
	b, _ := yaml.Marshal(run.Status)
	return string(b)
}

// succeeded returns a check that the Succeeded condition has this status (and reason, if given).
func succeeded(status corev1.ConditionStatus, reason string) func(*assert.CollectT, *v1beta1.CustomRun) {
	return func(ct *assert.CollectT, run *v1beta1.CustomRun) {
		cond := run.Status.Succeeded()
		if !assert.NotNil(ct, cond) {
			return
		}
		assert.Equal(ct, status, cond.Status)
		if reason != "" {
			assert.Equal(ct, reason, cond.Reason)
		}
	}
}

// oneTrainJob waits for the run's TrainJob and returns it.
func oneTrainJob(t *testing.T, ns string) trainer.TrainJob {
	t.Helper()
	var tj trainer.TrainJob
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		l := testenv.TrainJobs(t.Context(), ct, c, ns)
		if assert.Len(ct, l, 1) {
			tj = l[0]
		}
	}, testenv.Timeout, testenv.Interval)
	return tj
}

func result(run *v1beta1.CustomRun, name string) (string, bool) {
	for _, r := range run.Status.Results {
		if r.Name == name {
			return r.Value, true
		}
	}
	return "", false
}

func patchSpec(t *testing.T, run *v1beta1.CustomRun, patch string) {
	t.Helper()
	require.NoError(t, c.Patch(t.Context(), run, client.RawPatch("application/json-patch+json", []byte(patch))))
}

// cancelPatch is the JSON patch Tekton's PipelineRun controller sends to every child CustomRun.
const cancelPatch = `[{"op":"add","path":"/spec/status","value":"RunCancelled"},` +
	`{"op":"add","path":"/spec/statusMessage","value":"CustomRun cancelled as the PipelineRun it belongs to has been cancelled."}]`

// jaxRun is the CustomRun most tests need: a JAX step whose TrainJob the simulator treats as
// simMode says (succeed, fail, fail-twice, hold). Each spec line (retries: 2, timeout: 3s, …)
// goes into the CustomRun's spec.
func jaxRun(t testing.TB, ns, name, simMode string, spec ...string) *v1beta1.CustomRun {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "metadata: {name: %s}\nspec:\n  %s", name, ours)
	for _, l := range spec {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	fmt.Fprintf(&b, "  params:\n  - {name: framework, value: jax}\n  - {name: trainer.func, value: \"def train(): pass\"}\n  - {name: labels.sim-mode, value: %s}\n", simMode)
	return customRun(t, ns, b.String())
}
