package conformance_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// denyLabel, with the step's own value (denyValue in its step), marks the TrainJobs
// denyCreate's policy refuses: only this step's, whichever face runs it and whatever else shares
// its namespace (Argo's).
const (
	denyLabel = "conformance.trainstep.dev/deny"
	denyValue = "DENY_VALUE"
)

// denyCreate makes the apiserver answer 403 Forbidden to the creation of the step's TrainJob, as
// it does to a face that may not create TrainJobs there.
func denyCreate(t *testing.T, r *running) { deny(t, r, admissionv1.Create) }

// denyDelete makes the apiserver answer 403 Forbidden to a delete of the step's TrainJob, as it
// does to a face that may create TrainJobs but not delete them.
func denyDelete(t *testing.T, r *running) { deny(t, r, admissionv1.Delete) }

// deny makes the apiserver answer 403 Forbidden to op on the step's TrainJob: a
// ValidatingAdmissionPolicy with reason Forbidden, matched on the step's denyLabel (a delete's
// request carries the object as oldObject). It returns once the apiserver applies the policy,
// which it does a moment after the policy is created.
func deny(t *testing.T, r *running, op admissionv1.OperationType) {
	r.deny = "step-" + uuid.NewString()[:8]
	name := "conformance-deny-" + r.deny
	subject := "object"
	if op == admissionv1.Delete {
		subject = "oldObject"
	}
	probe := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, GenerateName: "probe-", Labels: map[string]string{denyLabel: r.deny}},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed",
			Kind: ptr.To(trainer.ClusterTrainingRuntimeKind), APIGroup: ptr.To(trainer.GroupVersion.Group)},
			Suspend: ptr.To(true)},
	}
	if op == admissionv1.Delete {
		// A suspended probe, to delete with a dry run: nothing of it runs meanwhile.
		require.NoError(t, stack.Client.Create(t.Context(), probe))
		// Registered before the policy's cleanup, so it runs after the policy is gone.
		t.Cleanup(func() { _ = stack.Client.Delete(context.Background(), probe) })
	}
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{op},
					Rule: admissionv1.Rule{APIGroups: []string{trainer.GroupVersion.Group}, APIVersions: []string{"*"},
						Resources: []string{"trainjobs"}},
				},
			}}},
			MatchConditions: []admissionv1.MatchCondition{{Name: "this-step",
				Expression: fmt.Sprintf(`has(%[1]s.metadata.labels) && %[2]q in %[1]s.metadata.labels && %[1]s.metadata.labels[%[2]q] == %[3]q`,
					subject, denyLabel, r.deny)}},
			Validations: []admissionv1.Validation{{Expression: "false", Reason: ptr.To(metav1.StatusReasonForbidden),
				Message: fmt.Sprintf("this step may not %s TrainJobs in %s", strings.ToLower(string(op)), r.ns)}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}
	for _, o := range []client.Object{policy, binding} {
		require.NoError(t, stack.Client.Create(t.Context(), o))
		t.Cleanup(func() { _ = stack.Client.Delete(context.Background(), o) })
	}
	require.Eventually(t, func() bool {
		if op == admissionv1.Delete {
			return apierrors.IsForbidden(stack.Client.Delete(t.Context(), probe, client.DryRunAll))
		}
		return apierrors.IsForbidden(stack.Client.Create(t.Context(), probe.DeepCopy(), client.DryRunAll))
	}, timeout, interval, "the apiserver must apply the policy")
}
