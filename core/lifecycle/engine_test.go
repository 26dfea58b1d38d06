package lifecycle

import (
	"context"
	"errors"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/trainstep/trainstep/core/runtimes/stock"
	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainers"
	"github.com/trainstep/trainstep/core/trainjob"
)

var t0 = time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)

const validStep = "framework: torch\ntrainer: {numNodes: 2, func: \"def train(): pass\"}\n"

func parse(t *testing.T, y string) *step.Spec {
	t.Helper()
	s, err := step.Parse([]byte(y))
	require.NoError(t, err)
	return s
}

// engine runs on a fake cluster holding objs; cache and API are the same store, unless a test
// makes the cache lag. refuse, when set, answers every create.
func engine(t *testing.T, refuse error, objs ...client.Object) (*Engine, client.Client) {
	t.Helper()
	scheme, err := trainjob.NewScheme()
	require.NoError(t, err)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if refuse != nil {
				return refuse
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
	e := &Engine{
		Cluster: Cluster{Cache: c, API: c, Writer: c,
			Snapshot: func(_ context.Context, tj *trainer.TrainJob) (trainjob.Snapshot, error) {
				return trainjob.Snapshot{TrainJob: tj}, nil
			}},
		Planner: &trainjob.Planner{Trainers: trainers.Builtin(), Runtimes: stock.Source{}},
		Clock:   clocktesting.NewFakePassiveClock(t0.Add(time.Hour)),
	}
	return e, c
}

func identity() trainjob.Identity {
	return trainjob.Identity{Engine: "test", OwnerUID: "uid-1", StepKey: "train"}
}

func ownJob(conds ...metav1.Condition) *trainer.TrainJob {
	id := identity()
	return &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: id.Name(), Namespace: "ns", Labels: id.Labels(), CreationTimestamp: metav1.NewTime(t0)},
		Status:     trainer.TrainJobStatus{Conditions: conds},
	}
}

// TestLook is the engine's one next thing in each situation a face meets, and what the step
// says then.
func TestLook(t *testing.T) {
	id := identity()
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: trainer.GroupVersion.Group, Resource: "trainjobs"}, id.Name(), errors.New("no"))
	unavailable := apierrors.NewServiceUnavailable("etcd is down")
	complete := metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "JobsCompleted", Message: "jobset completed", LastTransitionTime: metav1.NewTime(t0.Add(time.Minute))}
	cases := map[string]struct {
		existing  []client.Object
		spec      string
		refuse    error
		step      func(*Step)
		phase     trainjob.Phase
		reason    string
		message   string
		created   bool
		invalid   bool
		stopped   bool
		deleted   bool
		retry     bool
		done      bool
		remaining int // TrainJobs left
		class     trainjob.FailureClass
	}{
		"no job yet: planned and created": {
			phase: trainjob.PhasePending, message: "is starting: 0/2 nodes running", created: true, remaining: 1,
		},
		"invalid step: nothing created, the field named": {
			spec: "framework: torch\ntrainer: {numNodes: 0, func: \"def train(): pass\"}\n", invalid: true, done: true,
			message: "numNodes", class: trainjob.ClassInvalid,
		},
		"the create is forbidden: the step ends with the fix": {
			refuse: forbidden, phase: trainjob.PhaseFailed, reason: ReasonForbidden, done: true, class: trainjob.ClassRefused,
			message: "may not create the TrainJob; grant it the rules",
		},
		"the apiserver is down: tried again": {
			refuse: unavailable, phase: trainjob.PhasePending, reason: ReasonCreateRetrying, retry: true,
			message: "creating the TrainJob failed (the apiserver answered 503 ServiceUnavailable); retrying with back-off",
		},
		"its job exists: followed, not created again": {
			existing: []client.Object{ownJob()}, phase: trainjob.PhasePending, remaining: 1,
		},
		"its job finished: the outputs": {
			existing: []client.Object{ownJob(complete)}, phase: trainjob.PhaseSucceeded, done: true, remaining: 1,
		},
		"a recorded job someone deleted: failed, not trained again": {
			step: func(s *Step) { s.Recorded = id.Name() }, phase: trainjob.PhaseFailed, reason: ReasonTrainJobDeleted, done: true, class: trainjob.ClassCancelled,
			message: "was deleted before it finished; trainstep does not start it again from zero",
		},
		"the timeout passed before any job: timed out, nothing created": {
			step:  func(s *Step) { s.Deadlines = trainjob.Deadlines{Timeout: time.Minute, Since: t0} },
			phase: trainjob.PhaseTimedOut, reason: trainjob.ReasonTimeout, done: true, class: trainjob.ClassTimeout, message: "timeout of 1m0s passed before its TrainJob was created",
		},
		"the name is someone else's job: failed": {
			existing: []client.Object{&trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: id.Name(), Namespace: "ns"}}},
			phase:    trainjob.PhaseFailed, reason: ReasonNameTaken, done: true, remaining: 1, class: trainjob.ClassInvalid,
		},
		"stopped: its job deleted": {
			existing: []client.Object{ownJob()}, step: func(s *Step) { s.Stop = true }, stopped: true, deleted: true, done: true, class: trainjob.ClassCancelled,
		},
		"stopped, keeping its job": {
			existing: []client.Object{ownJob()}, step: func(s *Step) { s.Stop, s.KeepOnStop = true, true }, stopped: true, done: true, remaining: 1, class: trainjob.ClassCancelled,
		},
		"stopped after its job ended (a retry waiting out its backoff): the job stays for its logs": {
			existing: []client.Object{ownJob(metav1.Condition{Type: trainer.TrainJobFailed, Status: metav1.ConditionTrue, Reason: "FailedJobs",
				Message: "jobset failed", LastTransitionTime: metav1.NewTime(t0.Add(time.Minute))})},
			step: func(s *Step) { s.Stop = true }, stopped: true, done: true, remaining: 1, class: trainjob.ClassCancelled,
		},
		"stopped before any job: nothing to delete": {
			step: func(s *Step) { s.Stop = true }, stopped: true, done: true, class: trainjob.ClassCancelled,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, c := engine(t, tc.refuse, tc.existing...)
			spec := tc.spec
			if spec == "" {
				spec = validStep
			}
			s := Step{Spec: parse(t, spec), Namespace: "ns", Identity: id}
			if tc.step != nil {
				tc.step(&s)
			}
			st := e.Look(t.Context(), s)
			assert.Equal(t, tc.done, st.Done(), "done: %+v", st)
			assert.Equal(t, tc.retry, st.Err != nil, "err: %v", st.Err)
			assert.Equal(t, tc.invalid, st.Invalid != nil)
			assert.Equal(t, tc.stopped, st.Stopped)
			assert.Equal(t, tc.deleted, st.Deleted)
			assert.Equal(t, tc.created, st.Created)
			if tc.phase != "" {
				assert.Equal(t, tc.phase, st.Phase, st.Message)
			}
			if tc.reason != "" {
				assert.Equal(t, tc.reason, st.Reason)
			}
			assert.Contains(t, st.Message, tc.message)
			if tc.class == "" {
				assert.Nil(t, st.Failure, "only a step that failed has a failure class")
			} else if assert.NotNil(t, st.Failure) {
				assert.Equal(t, tc.class, st.Failure.Class)
				assert.Equal(t, string(tc.class), st.Outputs()[trainjob.OutFailureClass])
			}
			l := &trainer.TrainJobList{}
			require.NoError(t, c.List(t.Context(), l))
			assert.Len(t, l.Items, tc.remaining)
		})
	}
}

// A job this step created that the face's cache does not show yet is the cache lagging, not a
// deletion: the step looks again when the watch brings it.
func TestLookWaitsForALaggingCache(t *testing.T) {
	e, _ := engine(t, nil, ownJob())
	scheme, err := trainjob.NewScheme()
	require.NoError(t, err)
	e.Cache = fake.NewClientBuilder().WithScheme(scheme).Build() // empty: it lags
	st := e.Look(t.Context(), Step{Spec: parse(t, validStep), Namespace: "ns", Identity: identity(), Recorded: identity().Name()})
	require.ErrorIs(t, st.Err, ErrCacheLags)
	assert.False(t, st.Done())
	assert.Equal(t, identity().Name(), st.Name)
}

// LookAt answers from the job a face has just found, reading the cache no more; Look and LookAt
// of the same job say the same.
func TestLookAtReadsNoMore(t *testing.T) {
	succeeded := metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "Completed"}
	e, _ := engine(t, nil, ownJob(succeeded))
	s := Step{Spec: parse(t, validStep), Namespace: "ns", Identity: identity()}
	tj, err := e.Find(t.Context(), "ns", identity())
	require.NoError(t, err)
	require.NotNil(t, tj)
	want := e.Look(t.Context(), s)

	reads := 0
	e.Cache = interceptor.NewClient(e.Cache.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			reads++
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			reads++
			return c.List(ctx, list, opts...)
		},
	})
	got := e.LookAt(t.Context(), s, tj)
	assert.Zero(t, reads, "LookAt read the cache again")
	assert.Equal(t, want, got)
	assert.Equal(t, trainjob.PhaseSucceeded, got.Phase)
}
