package lifecycle

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/trainstep/trainstep/core/runtimes/stock"
	"github.com/trainstep/trainstep/core/trainers"
	"github.com/trainstep/trainstep/core/trainjob"
)

// `executor run` stops a step whose retry's TrainJob it may not watch (a Role that names the
// jobs it may list): the retry it just created is deleted, not left training with no one to
// follow it.
func TestARunStopsTheStepWhenItMayNotWatchItsRetry(t *testing.T) {
	// The fake client sends no bookmark, which client-go's streaming list waits for: list, then
	// watch, as client-go does against an apiserver without it.
	t.Setenv("KUBE_FEATURE_WatchListClient", "false")
	first := retryJob(0, 0, failedAt(time.Minute))
	oom := nodePod(first, corev1.PodFailed, "OOMKilled", 137)
	retry := identity()
	retry.Attempt = 1
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: trainer.GroupVersion.Group, Resource: "trainjobs"}, retry.Name(), errors.New("not in the Role's resourceNames"))
	scheme, err := trainjob.NewScheme()
	require.NoError(t, err)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(first, &oom).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lo := (&client.ListOptions{}).ApplyOptions(opts)
			if _, ok := list.(*trainer.TrainJobList); ok && lo.Raw != nil && strings.Contains(lo.Raw.FieldSelector, retry.Name()) {
				return forbidden
			}
			return c.List(ctx, list, opts...)
		},
	}).Build()
	r := &Runner{Client: c, Planner: &trainjob.Planner{Trainers: trainers.Builtin(), Runtimes: stock.Source{}},
		Clock: clocktesting.NewFakePassiveClock(t0.Add(time.Hour))}
	s := Step{Spec: parse(t, validStep+"retry: {limit: 1}\n"), Namespace: "ns", Identity: identity()}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	st, err := r.Run(ctx, s, RunOptions{})
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrForbidden)
	assert.Equal(t, retry.Name(), st.Name)
	assert.True(t, st.Deleted, "the retry is deleted: %s", st.Message)
	l := &trainer.TrainJobList{}
	require.NoError(t, c.List(t.Context(), l))
	require.Len(t, l.Items, 1, "only the failed first TrainJob is left, for its logs")
	assert.Equal(t, first.Name, l.Items[0].Name)
}
