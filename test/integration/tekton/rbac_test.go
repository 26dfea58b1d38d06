package tekton_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/test/internal/tektonharness"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// The controller runs with exactly the rights manifests/tekton/rbac.yaml grants: a success, a
// failure and a cancel all work, with leader election on.
func TestManifestRBACIsEnough(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	user := grantManifestRBAC(t, ns, nil)
	cfg, err := env.UserConfig(user)
	require.NoError(t, err)
	startControllerAs(t, cfg, ns, func(o *tekton.Options) { o.LeaderElection, o.LeaderElectionNamespace = true, ns })

	create(t, jaxRun(t, ns, "ok", "succeed"))
	create(t, jaxRun(t, ns, "bad", "fail"))
	held := create(t, jaxRun(t, ns, "held", "hold"))
	waitRun(t, ns, "ok", succeeded(corev1.ConditionTrue, ""))
	waitRun(t, ns, "bad", succeeded(corev1.ConditionFalse, "FailedJobs"))
	waitRun(t, ns, "held", succeeded(corev1.ConditionUnknown, "Running"))
	patchSpec(t, held, cancelPatch)
	waitRun(t, ns, "held", succeeded(corev1.ConditionFalse, tekton.ReasonCancelled))
}

// Under OwnerReferencesPermissionEnforcement (the test apiserver runs with it, as OpenShift does)
// a controller without update on customruns/finalizers may not set blockOwnerDeletion: the run
// ends at once saying so, instead of "planning the TrainJob" until a timeout.
func TestForbiddenCreateFinishesTheRun(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	user := grantManifestRBAC(t, ns, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "customruns/finalizers") })
	cfg, err := env.UserConfig(user)
	require.NoError(t, err)
	startControllerAs(t, cfg, ns)
	create(t, jaxRun(t, ns, "train", "succeed"))
	run := waitRun(t, ns, "train", succeeded(corev1.ConditionFalse, tekton.ReasonForbidden))
	assert.Contains(t, run.Status.Succeeded().Message, "manifests/tekton/rbac.yaml")
	assert.Contains(t, run.Status.Succeeded().Message, "finalizers")
	assert.Empty(t, testenv.TrainJobs(t.Context(), t, c, ns))
}

// A controller upgraded without this release's RBAC (here: no get on the TrainJob CRD, which says
// which Trainer is installed) cannot plan: the run fails at once with the forbidden read and the
// fix, instead of "planning the TrainJob" until a timeout with the cause only in the log.
func TestForbiddenPlanningFinishesTheRun(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	user := grantManifestRBAC(t, ns, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "customresourcedefinitions") })
	cfg, err := env.UserConfig(user)
	require.NoError(t, err)
	startControllerAs(t, cfg, ns)
	create(t, jaxRun(t, ns, "train", "succeed"))
	run := waitRun(t, ns, "train", succeeded(corev1.ConditionFalse, tekton.ReasonPlanningForbidden))
	msg := run.Status.Succeeded().Message
	assert.Contains(t, msg, `cannot get resource "customresourcedefinitions"`)
	assert.Contains(t, msg, "manifests/tekton/rbac.yaml")
	assert.NotNil(t, run.Status.CompletionTime)
	assert.Empty(t, testenv.TrainJobs(t.Context(), t, c, ns))
}

// grantManifestRBAC binds a user of the namespace to the rules manifests/tekton/rbac.yaml grants,
// less those drop selects, and returns the user.
func grantManifestRBAC(t *testing.T, ns string, drop func(rbacv1.PolicyRule) bool) string {
	t.Helper()
	user := "trainstep-tekton-" + ns
	tektonharness.GrantManifestRBAC(t, c, ns, user, drop)
	return user
}
