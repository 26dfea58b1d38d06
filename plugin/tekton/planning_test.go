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
