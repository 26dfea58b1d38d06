package lifecycle

import (
	"context"
	"errors"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/trainstep/trainstep/core/stepcache"
	"github.com/trainstep/trainstep/core/trainjob"
)

const cachedStep = validStep + "cache: {maxAge: 24h}\n"

// trainToSuccess looks at s until its TrainJob exists, completes the job, and looks again:
// the step's final status.
func trainToSuccess(t *testing.T, e *Engine, c client.Client, s Step) Status {
	t.Helper()
	st := e.Look(t.Context(), s)
	require.True(t, st.Created, st.Message)
	tj := &trainer.TrainJob{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: s.Namespace, Name: st.Name}, tj))
	meta.SetStatusCondition(&tj.Status.Conditions, metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue,
		Reason: "JobsCompleted", Message: "jobset completed"})
	require.NoError(t, c.Update(t.Context(), tj))
	st = e.Look(t.Context(), s)
	require.Equal(t, trainjob.PhaseSucceeded, st.Phase, st.Message)
	return st
}

func trainJobCount(t *testing.T, c client.Client) int {
	l := &trainer.TrainJobList{}
	require.NoError(t, c.List(t.Context(), l))
	return len(l.Items)
}

// A second step the same as one that succeeded is served its outputs and creates nothing; its
// own identity (another run, another attempt) does not matter, its content does.
func TestACachedStepIsServedTheOutputsOfTheOneThatTrained(t *testing.T) {
	e, c := engine(t, nil)
	first := Step{Spec: parse(t, cachedStep), Namespace: "ns", Identity: identity()}
	done := trainToSuccess(t, e, c, first)
	out := done.Outputs()
	assert.Regexp(t, `^[0-9a-f]{64}$`, out[trainjob.OutCacheKey])
	assert.Equal(t, "false", out[trainjob.OutCacheHit])
	assert.Empty(t, out[trainjob.OutCachedFrom])
	tj := &trainer.TrainJob{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: done.Name}, tj))
	assert.Equal(t, out[trainjob.OutCacheKey], tj.Annotations[stepcache.AnnotationKey], "the job carries its key")

	again := first
	again.Identity.OwnerUID, again.Identity.Attempt = "uid-2", 3
	st := e.Look(t.Context(), again)
	assert.True(t, st.Done())
	assert.False(t, st.Created)
	assert.Equal(t, 1, trainJobCount(t, c), "a hit creates nothing")
	assert.Equal(t, trainjob.PhaseSucceeded, st.Phase)
	assert.Equal(t, ReasonCacheHit, st.Reason)
	assert.Contains(t, st.Message, "served from the step cache: TrainJob "+done.Name+" trained it 0s ago (cache.maxAge 24h0m0s)")
	hit := st.Outputs()
	assert.Equal(t, "true", hit[trainjob.OutCacheHit])
	assert.Equal(t, done.Name, hit[trainjob.OutCachedFrom])
	for n, v := range out {
		if n != trainjob.OutCacheHit && n != trainjob.OutCachedFrom {
			assert.Equal(t, v, hit[n], "output %s as it was stored", n)
		}
	}
	assert.Len(t, hit, len(out))

	changed := again
	changed.Spec = parse(t, "framework: torch\ntrainer: {numNodes: 3, func: \"def train(): pass\"}\ncache: {maxAge: 24h}\n")
	assert.True(t, e.Look(t.Context(), changed).Created, "another step trains")
}

// A stored success is not served past the step's maxAge, nor to a step that refreshes it; what
// either trains replaces it.
func TestACachedStepTrainsPastMaxAgeOrOnRefresh(t *testing.T) {
	for name, tc := range map[string]struct {
		spec  string
		later time.Duration
	}{
		"past maxAge": {spec: "framework: torch\ntrainer: {numNodes: 2, func: \"def train(): pass\"}\ncache: {maxAge: 1h}\n", later: time.Hour + time.Second},
		"refresh":     {spec: "framework: torch\ntrainer: {numNodes: 2, func: \"def train(): pass\"}\ncache: {maxAge: 24h, refresh: true}\n"},
	} {
		t.Run(name, func(t *testing.T) {
			e, c := engine(t, nil)
			clock := clocktesting.NewFakeClock(t0)
			e.Clock = clock
			s := Step{Spec: parse(t, tc.spec), Namespace: "ns", Identity: identity()}
			first := trainToSuccess(t, e, c, s)
			clock.Step(tc.later)
			s.Identity.OwnerUID = "uid-2"
			second := trainToSuccess(t, e, c, s)
			entry, err := e.cache().Get(t.Context(), "ns", first.CacheKey)
			require.NoError(t, err)
			require.NotNil(t, entry)
			assert.Equal(t, second.Name, entry.TrainJob, "the new success replaced the old")
		})
	}
}

// Only successes are stored.
func TestAFailedStepIsNotStored(t *testing.T) {
	e, c := engine(t, nil)
	s := Step{Spec: parse(t, cachedStep), Namespace: "ns", Identity: identity()}
	st := e.Look(t.Context(), s)
	tj := &trainer.TrainJob{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: st.Name}, tj))
	meta.SetStatusCondition(&tj.Status.Conditions, metav1.Condition{Type: trainer.TrainJobFailed, Status: metav1.ConditionTrue,
		Reason: "FailedJobs", Message: "jobset failed"})
	require.NoError(t, c.Update(t.Context(), tj))
	st = e.Look(t.Context(), s)
	require.Equal(t, trainjob.PhaseFailed, st.Phase)
	require.NotEmpty(t, st.CacheKey)
	entry, err := e.cache().Get(t.Context(), "ns", st.CacheKey)
	require.NoError(t, err)
	assert.Nil(t, entry)
}

// A cache the face may not read or write is a warning: the step trains, and succeeds.
func TestACacheTrainstepMayNotUseIsAWarning(t *testing.T) {
	e, c := engine(t, nil)
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "x", errors.New("no"))
	guarded := interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.ConfigMap); ok {
				return forbidden
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*corev1.ConfigMap); ok {
				return forbidden
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	e.API, e.Writer, e.Cache = guarded, guarded, guarded
	var warnings []string
	e.Warn = func(_ context.Context, msg string, err error) { warnings = append(warnings, msg+": "+err.Error()) }
	st := trainToSuccess(t, e, guarded, Step{Spec: parse(t, cachedStep), Namespace: "ns", Identity: identity()})
	assert.Equal(t, "false", st.Outputs()[trainjob.OutCacheHit])
	require.Len(t, warnings, 3)
	assert.Contains(t, warnings[0], "the step cache could not be read, so the step trains")
	assert.Contains(t, warnings[1], "the step cache could not be claimed, so the step trains without looking for another step of its key")
	assert.Contains(t, warnings[2], "could not be stored in the step cache")
}
