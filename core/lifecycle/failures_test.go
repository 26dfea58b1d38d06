package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/trainjob"
)

// failingRuntimes is a runtime source that answers every list with err.
type failingRuntimes struct{ err error }

func (f failingRuntimes) List(context.Context, string) (runtimes.Catalog, error) {
	return runtimes.Catalog{}, f.err
}

// A failure to plan that no retry mends ends the step with its cause and the fix; one that may
// pass is tried again, saying why.
func TestPlanningFailures(t *testing.T) {
	crd := schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}
	wrap := func(err error) error {
		return fmt.Errorf("reading CustomResourceDefinition trainjobs.trainer.kubeflow.org: %w", err)
	}
	for _, tc := range []struct {
		name   string
		err    error
		retry  bool
		reason string
		says   []string
	}{
		{"forbidden", wrap(apierrors.NewForbidden(crd, "trainjobs.trainer.kubeflow.org", errors.New("RBAC: no rule"))),
			false, ReasonPlanningForbidden, []string{"customresourcedefinitions", "manifests/x/rbac.yaml"}},
		{"CRD missing", wrap(apierrors.NewNotFound(crd, "trainjobs.trainer.kubeflow.org")),
			false, ReasonPlanningFailed, []string{"Kubeflow Trainer", "installed"}},
		{"kind not served", &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "trainer.kubeflow.org", Kind: "ClusterTrainingRuntime"}},
			false, ReasonPlanningFailed, []string{"Kubeflow Trainer"}},
		{"timeout", wrap(apierrors.NewTimeoutError("request timed out", 1)), true, ReasonPlanningRetrying, []string{"(the apiserver answered 504 Timeout); retrying"}},
		{"5xx", wrap(apierrors.NewInternalError(errors.New("etcd leader changed"))), true, ReasonPlanningRetrying, []string{"retrying", "500", "etcd leader changed"}},
		{"throttled", wrap(apierrors.NewTooManyRequests("slow down", 1)), true, ReasonPlanningRetrying, []string{"retrying", "429"}},
		{"network", wrap(context.DeadlineExceeded), true, ReasonPlanningRetrying, []string{"failed; retrying", "deadline exceeded"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := engine(t, nil)
			e.Planner = &trainjob.Planner{Trainers: e.Planner.Trainers, Runtimes: failingRuntimes{tc.err}, API: &trainjob.AssumedAPI}
			e.RBAC = "manifests/x/rbac.yaml"
			st := e.Look(t.Context(), Step{Spec: parse(t, validStep), Namespace: "ns", Identity: identity()})
			assert.Equal(t, tc.retry, st.Err != nil, "retried: %v", st.Err)
			assert.Equal(t, !tc.retry, st.Done())
			assert.Equal(t, tc.reason, st.Reason)
			for _, w := range tc.says {
				assert.Contains(t, st.Message, w)
			}
		})
	}
}
