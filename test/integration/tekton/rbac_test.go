package tekton_test

import (
	"context"
	"slices"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// An admission check that refuses the TrainJob itself (here a ValidatingAdmissionPolicy, as the
// Trainer's webhook refuses one) would refuse it again: the run ends at once in the apiserver's
// words, instead of "planning the TrainJob" while the controller retries until a timeout.
func TestRefusedTrainJobFinishesTheRun(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-trainjobs-" + ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"trainer.kubeflow.org"}, APIVersions: []string{"*"}, Resources: []string{"trainjobs"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "trainjobs are not accepted here"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns},
			}},
		},
	}
	for _, o := range []client.Object{policy, binding} {
		require.NoError(t, c.Create(t.Context(), o))
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
	}
	// The policy is enforced once the apiserver has loaded it: a TrainJob created directly is refused.
	require.Eventually(t, func() bool {
		probe := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns}, Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "x"}}}
		err := c.Create(t.Context(), probe)
		if err == nil {
			_ = c.Delete(t.Context(), probe)
		}
		return apierrors.IsInvalid(err)
	}, testenv.Timeout, testenv.Interval, "the admission policy must refuse TrainJobs")

	startController(t, ns)
	create(t, jaxRun(t, ns, "train", "succeed"))
	run := waitRun(t, ns, "train", succeeded(corev1.ConditionFalse, tekton.ReasonTrainJobRefused))
	assert.Contains(t, run.Status.Succeeded().Message, "trainjobs are not accepted here")
	assert.Empty(t, testenv.TrainJobs(t.Context(), t, c, ns))
}
