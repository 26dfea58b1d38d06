package trainjob

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// jobServer plays the apiserver for the TrainJob watch of a wait: the test decides what each list
// returns and drives each watch the wait opens. Pods and Events list empty and never change.
type jobServer struct {
	mu       sync.Mutex
	job      *trainer.TrainJob // what a list returns (nil: none)
	listErr  error
	lists    int
	watchRVs []string
	watches  chan *watch.FakeWatcher
}

func newJobServer(t *testing.T, job *trainer.TrainJob) (*jobServer, client.WithWatch) {
	scheme, err := NewScheme()
	require.NoError(t, err)
	s := &jobServer{job: job, watches: make(chan *watch.FakeWatcher, 8)}
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			switch l := list.(type) {
			case *trainer.TrainJobList:
				s.mu.Lock()
				defer s.mu.Unlock()
				s.lists++
				if s.listErr != nil {
					return s.listErr
				}
				l.ResourceVersion = "100"
				if s.job != nil {
					l.Items = []trainer.TrainJob{*s.job.DeepCopy()}
				}
				return nil
			case *corev1.PodList, *corev1.EventList:
				list.(interface{ SetResourceVersion(string) }).SetResourceVersion("1")
				return nil
			}
			return c.List(ctx, list, opts...)
		},
		Watch: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
			o := client.ListOptions{}
			o.ApplyOptions(opts)
			if o.Raw != nil && o.Raw.SendInitialEvents != nil {
				// The informers' watch-list: refused, so they list, as against an older apiserver.
				return nil, apierrors.NewBadRequest("no watch-list here")
			}
			w := watch.NewFake()
			if _, ok := list.(*trainer.TrainJobList); ok {
				s.mu.Lock()
				s.watchRVs = append(s.watchRVs, o.Raw.ResourceVersion)
				s.mu.Unlock()
				s.watches <- w
			}
			return w, nil
		},
	}).Build()
	return s, c
}

func (s *jobServer) next(t *testing.T) *watch.FakeWatcher {
	t.Helper()
	select {
	case w := <-s.watches:
		return w
	case <-time.After(30 * time.Second):
		t.Fatal("the wait opened no watch on the TrainJob")
		return nil
	}
}

func (s *jobServer) counts() (lists int, rvs []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists, append([]string(nil), s.watchRVs...)
}

func waitJob(rv string, conds ...metav1.Condition) *trainer.TrainJob {
	return &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns", ResourceVersion: rv},
		Status:     trainer.TrainJobStatus{Conditions: conds},
	}
}

type waitResult struct {
	obs Observation
	err error
}

func startWait(t *testing.T, c client.WithWatch) <-chan waitResult {
	done := make(chan waitResult, 1)
	go func() {
		obs, err := (&Waiter{Client: c}).Wait(t.Context(), "ns", "job", WaitOptions{})
		done <- waitResult{obs, err}
	}()
	return done
}

// TestWaitFollowsItsWatch: a dropped stream is watched again from the last version seen (no
// list), a watch error (410 Gone) is listed again, and the terminal event ends the wait.
func TestWaitFollowsItsWatch(t *testing.T) {
	s, c := newJobServer(t, waitJob("100"))
	done := startWait(t, c)
	w := s.next(t)
	w.Modify(waitJob("101"))
	w.Stop() // the apiserver ends the stream
	w = s.next(t)
	lists, rvs := s.counts()
	assert.Equal(t, 1, lists, "a dropped stream is resumed, not listed again")
	assert.Equal(t, []string{"100", "101"}, rvs)

	w.Error(&apierrors.NewResourceExpired("too old resource version").ErrStatus)
	w = s.next(t)
	lists, rvs = s.counts()
	assert.Equal(t, 2, lists, "a 410 is listed again")
	assert.Equal(t, []string{"100", "101", "100"}, rvs)

	w.Modify(waitJob("102", metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "AllJobsCompleted"}))
	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, PhaseSucceeded, r.obs.Phase)
}

// TestWaitEnds: a deleted TrainJob, one that is not there, and a list the caller may not make.
func TestWaitEnds(t *testing.T) {
	t.Run("deleted", func(t *testing.T) {
		s, c := newJobServer(t, waitJob("100"))
		done := startWait(t, c)
		s.next(t).Delete(waitJob("101"))
		assert.ErrorIs(t, (<-done).err, ErrDeleted)
	})
	t.Run("absent", func(t *testing.T) {
		_, c := newJobServer(t, nil)
		assert.ErrorIs(t, (<-startWait(t, c)).err, ErrDeleted)
	})
	t.Run("forbidden", func(t *testing.T) {
		s, c := newJobServer(t, waitJob("100"))
		s.listErr = apierrors.NewForbidden(schema.GroupResource{Group: trainer.GroupVersion.Group, Resource: "trainjobs"}, "", errors.New("no"))
		err := (<-startWait(t, c)).err
		assert.ErrorIs(t, err, ErrForbidden)
		assert.Contains(t, err.Error(), "trainjobs")
	})
}
