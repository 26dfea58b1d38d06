package tekton

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A failure no retry mends ends the run with its cause; one that may pass keeps it Unknown,
// saying it is retrying and why.
func TestClassifyPlanning(t *testing.T) {
	crd := schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}
	wrap := func(err error) error {
		return fmt.Errorf("reading CustomResourceDefinition trainjobs.trainer.kubeflow.org: %w", err)
	}
	for _, tc := range []struct {
		name      string
		err       error
		permanent bool
		reason    string
		says      []string
	}{
		{"forbidden", wrap(apierrors.NewForbidden(crd, "trainjobs.trainer.kubeflow.org", errors.New("RBAC: no rule"))),
			true, ReasonPlanningForbidden, []string{"customresourcedefinitions", "manifests/tekton/rbac.yaml", "rerun"}},
		{"CRD missing", wrap(apierrors.NewNotFound(crd, "trainjobs.trainer.kubeflow.org")),
			true, ReasonPlanningFailed, []string{"Kubeflow Trainer", "installed"}},
		{"kind not served", &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "trainer.kubeflow.org", Kind: "ClusterTrainingRuntime"}},
			true, ReasonPlanningFailed, []string{"Kubeflow Trainer"}},
		{"timeout", wrap(apierrors.NewTimeoutError("request timed out", 1)), false, ReasonPlanningRetrying, []string{"(the apiserver answered 504 Timeout); retrying"}},
		{"5xx", wrap(apierrors.NewInternalError(errors.New("etcd leader changed"))), false, ReasonPlanningRetrying, []string{"retrying", "500", "etcd leader changed"}},
		{"conflict", wrap(apierrors.NewConflict(crd, "x", errors.New("changed"))), false, ReasonPlanningRetrying, []string{"retrying", "409"}},
		{"throttled", wrap(apierrors.NewTooManyRequests("slow down", 1)), false, ReasonPlanningRetrying, []string{"retrying", "429"}},
		{"network", wrap(context.DeadlineExceeded), false, ReasonPlanningRetrying, []string{"failed; retrying", "deadline exceeded"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := classifyPlanning(tc.err)
			assert.Equal(t, tc.permanent, f.permanent)
			assert.Equal(t, tc.reason, f.reason)
			for _, s := range tc.says {
				assert.Contains(t, f.message, s)
			}
		})
	}
}

// The TrainJob's create: a refusal of the object ends the run with the apiserver's words, the
// controller's RBAC with the fix, anything else keeps it Unknown, retrying.
func TestClassifyCreate(t *testing.T) {
	tj := schema.GroupResource{Group: "trainer.kubeflow.org", Resource: "trainjobs"}
	for _, tc := range []struct {
		name      string
		err       error
		permanent bool
		reason    string
		says      []string
	}{
		{"forbidden", apierrors.NewForbidden(tj, "job", errors.New("RBAC: no rule")), true, ReasonForbidden, []string{"manifests/tekton/rbac.yaml"}},
		{"webhook refuses", apierrors.NewInvalid(schema.GroupKind{Group: "trainer.kubeflow.org", Kind: "TrainJob"}, "job", nil), true, ReasonTrainJobRefused, []string{"refused the TrainJob", "job"}},
		{"bad request", apierrors.NewBadRequest(`admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request`), true, ReasonTrainJobRefused, []string{"denied the request"}},
		{"5xx", apierrors.NewInternalError(errors.New("etcd leader changed")), false, ReasonCreateRetrying, []string{"creating the TrainJob failed (the apiserver answered 500", "retrying"}},
		{"webhook unreachable", fmt.Errorf("Internal error occurred: failed calling webhook: %w", context.DeadlineExceeded), false, ReasonCreateRetrying, []string{"retrying", "failed calling webhook"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := classifyCreate(tc.err)
			assert.Equal(t, tc.permanent, f.permanent)
			assert.Equal(t, tc.reason, f.reason)
			for _, s := range tc.says {
				assert.Contains(t, f.message, s)
			}
		})
	}
}
