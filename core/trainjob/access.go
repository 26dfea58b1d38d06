package trainjob

import (
	"context"
	"errors"
	"fmt"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrForbidden means the caller may not do or read what running a step needs.
var ErrForbidden = errors.New("forbidden")

// Need is one permission a step that follows its own TrainJob cannot do without.
type Need struct {
	Group, Resource string
	Verbs           []string
}

// FollowNeeds is what a step that creates a TrainJob and waits for it must be allowed in its
// namespace: create it and delete it (at a deadline, on a stop), and list and watch it, its
// pods and the namespace's Events, which are the three watches of a wait (Waiter). Reading
// Kueue's Workloads and patching the TrainJob are not here: a step goes on without them.
func FollowNeeds() []Need {
	return []Need{
		{Group: trainer.GroupVersion.Group, Resource: "trainjobs", Verbs: []string{"create", "get", "list", "watch", "delete"}},
		{Resource: "pods", Verbs: []string{"get", "list", "watch"}},
		{Resource: "events", Verbs: []string{"list", "watch"}},
	}
}

// CheckAccess asks the apiserver (SelfSubjectAccessReviews, what `kubectl auth can-i` asks)
// whether the caller holds every permission of needs in namespace, before anything is
// created: a step that may create its TrainJob but not watch what follows it would otherwise
// start a training and walk away from it. The error names each missing permission and wraps
// ErrForbidden. When the reviews themselves cannot be made (an apiserver without the
// authorization API, a caller denied even that), it returns nil: the wait then finds any 403
// itself, and the caller deletes what it created.
func CheckAccess(ctx context.Context, c client.Client, namespace string, needs []Need) error {
	var missing []string
	for _, n := range needs {
		var denied []string
		for _, verb := range n.Verbs {
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Group: n.Group, Resource: n.Resource, Verb: verb},
			}}
			if err := c.Create(ctx, review); err != nil {
				return nil //nolint:nilerr // cannot tell: the wait catches a 403 itself
			}
			if !review.Status.Allowed {
				denied = append(denied, verb)
			}
		}
		if len(denied) > 0 {
			what := n.Resource
			if n.Group != "" {
				what += "." + n.Group
			}
			missing = append(missing, fmt.Sprintf("%s on %s", strings.Join(denied, ", "), what))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w: following a TrainJob needs %s in namespace %s, which this user may not do; nothing was created: grant them in a Role bound to the step's ServiceAccount (or user)",
		ErrForbidden, strings.Join(missing, "; "), namespace)
}
