package realstack_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/test/internal/realstack"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// A step whose merged Job spec the apiserver refuses (half a GPU: an extended resource must be
// a whole number, which neither the TrainJob CRD nor either webhook checks) never gets a pod:
// JobSet says so only in a JobCreationFailed Event on the JobSet. No retry can change the spec,
// so the step fails at once in JobSet's words, long before its startTimeout, and the TrainJob
// is deleted.
//
// JobSet before v0.11 records no such Event (it logs the refusal and retries): nothing in the
// cluster says why, so there the step fails at its startTimeout.
func TestInvalidJobFailsTheStepAtOnceInJobSetsWords(t *testing.T) {
	t.Parallel()
	ns := stack.Namespace(t)
	if _, jobset, err := realstack.Release(stack.Assets); err == nil && minorOf(jobset) < 11 {
		realstack.Lacks(t, "JobSet %s records no JobCreationFailed Event for a Job the apiserver refuses (it logs it and retries): the step fails at its startTimeout, as nothing in the cluster says why", jobset)
		r := executor(t, ns, "framework: torch\ntrainer: {numNodes: 2, resourcesPerNode: {gpu: \"0.5\"}, func: "+funcBody+"}\nstartTimeout: 20s\n")
		assert.Equal(t, cli.ExitFailed, r.Code, "stderr:\n%s", r.Stderr)
		assert.Equal(t, trainjob.ReasonStartTimeout, r.Outputs["reason"])
		require.Eventually(t, func() bool { return len(testenv.TrainJobs(t.Context(), t, stack.Client, ns)) == 0 },
			timeout, interval, "the TrainJob must be deleted")
		return
	}
	r := executor(t, ns, `
framework: torch
trainer:
  numNodes: 2
  resourcesPerNode: {gpu: "0.5"}
  func: |
    def train():
        pass
timeout: 30m
startTimeout: 20m
`)
	require.Equal(t, cli.ExitFailed, r.Code, "stderr:\n%s", r.Stderr)
	t.Logf("stderr:\n%s\nmessage: %s", r.Stderr, r.Outputs["message"])
	assert.Equal(t, "Failed", r.Outputs["phase"])
	assert.Equal(t, trainjob.ReasonJobCreationFailed, r.Outputs["reason"], "at once, not at startTimeout")
	msg := r.Outputs["message"]
	assert.Contains(t, msg, "the apiserver refuses its Job")
	assert.Contains(t, msg, "as invalid")
	assert.Contains(t, msg, `creation failed with error: Job.batch`, "JobSet's own words")
	assert.Contains(t, msg, "must be an integer", "the apiserver's reason")
	require.Eventually(t, func() bool { return len(testenv.TrainJobs(t.Context(), t, stack.Client, ns)) == 0 },
		timeout, interval, "the TrainJob must be deleted")
}

// A pod the apiserver refuses leaves no pod, only the Job controller's FailedCreate Event on the
// Job: the step names the cause in the Job's words while it waits, and startTimeout fails it with
// that cause, class refused. A quota and Pod Security are conformance rows through every face
// (test/conformance); a LimitRange stays here, for `executor run`: in Argo's one shared namespace
// it would limit Argo's own pods too.
func TestARefusedPodIsNamedWhileWaitingAndAtStartTimeout(t *testing.T) {
	cases := map[string]struct {
		setup func(t *testing.T, ns string)
		pod   string // the step's pod block
		want  []string
	}{
		"a LimitRange the pod's CPU exceeds": {
			setup: func(t *testing.T, ns string) {
				lr := &corev1.LimitRange{
					ObjectMeta: metav1.ObjectMeta{Name: "small", Namespace: ns},
					Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
						Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
					}}},
				}
				require.NoError(t, stack.Client.Create(t.Context(), lr))
			},
			want: []string{"cannot create pods: Error creating: pods", "is forbidden: maximum cpu usage per Container is 1, but limit is 4"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ns := stack.Namespace(t)
			tc.setup(t, ns)
			r := executor(t, ns, `
framework: torch
trainer:
  numNodes: 2
  resourcesPerNode: {cpu: 4}
  env: {KWOK_RUN_SECONDS: "600"}
  func: |
    def train():
        pass
timeout: 5m
startTimeout: 20s
`)
			require.Equal(t, cli.ExitFailed, r.Code, "stderr:\n%s", r.Stderr)
			t.Logf("stderr:\n%s\nmessage: %s", r.Stderr, r.Outputs["message"])
			assert.Equal(t, trainjob.ReasonStartTimeout, r.Outputs["reason"])
			assert.Equal(t, string(trainjob.ClassRefused), r.Outputs[trainjob.OutFailureClass])
			assert.Equal(t, "false", r.Outputs[trainjob.OutRetryable], "a LimitRange does not change by itself")
			assert.Contains(t, r.Outputs["message"], "did not start within 20s (startTimeout)")
			for _, w := range tc.want {
				assert.Contains(t, r.Stderr, w, "the running message says why before the end")
				assert.Contains(t, r.Outputs["message"], w, "startTimeout fails with the cause")
			}
			require.Eventually(t, func() bool { return len(testenv.TrainJobs(t.Context(), t, stack.Client, ns)) == 0 },
				timeout, interval, "the TrainJob must be deleted")
		})
	}
}

// The Trainer's TrainJobResourcesCreationFailed Event is news only until the JobSet exists: a
// quota that refused the JobSet and was then lifted is not the cause of a later failure to
// start (here: nodes no Node can hold). While refused, the step says so; at startTimeout its
// message names the unschedulable pods, not the healed refusal.
func TestAHealedResourceCreationFailureIsNotReportedAsTheCause(t *testing.T) {
	t.Parallel()
	ns := stack.Namespace(t)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-jobsets", Namespace: ns},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/jobsets.jobset.x-k8s.io": resource.MustParse("0")}},
	}
	require.NoError(t, stack.Client.Create(t.Context(), quota))
	require.Eventually(t, func() bool {
		return stack.Client.Get(t.Context(), client.ObjectKeyFromObject(quota), quota) == nil && quota.Status.Hard != nil
	}, timeout, interval, "the resourcequota controller must count quota %s", quota.Name)
	run := stack.StartExecutor(t, bin, ns, fmt.Sprintf(`
framework: torch
trainer:
  numNodes: 1
  resourcesPerNode: {gpu: %d}
  func: |
    def train():
        pass
timeout: 5m
startTimeout: 40s
`, realstack.NodeGPUs*2), timeout)
	require.Eventually(t, func() bool {
		return run.Exited() || strings.Contains(run.Stderr.String(), "the Trainer cannot create its resources")
	}, timeout, interval, "the step must say the Trainer cannot create the JobSet")
	require.False(t, run.Exited(), "stderr:\n%s", run.Stderr.String())
	require.NoError(t, stack.Client.Delete(t.Context(), quota))

	r := run.Result(t)
	t.Logf("stderr:\n%s\nmessage: %s", r.Stderr, r.Outputs["message"])
	require.Equal(t, cli.ExitFailed, r.Code)
	assert.Equal(t, trainjob.ReasonStartTimeout, r.Outputs["reason"])
	assert.NotContains(t, r.Outputs["message"], "cannot create its resources", "the refusal healed: it is not the cause")
	assert.Contains(t, r.Outputs["message"], "Insufficient nvidia.com/gpu", "the cause now: no Node can hold the pod")
}
