package lifecycle

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/trainstep/trainstep/core/trainjob"
)

// The start is recorded once per job however many looks meet it meanwhile; beside the look
// (RecordStartAside) the look does not wait for the write; a failed record is tried again.
func TestTheStartIsRecordedOnceAndBesideTheLookWhenAsked(t *testing.T) {
	for name, aside := range map[string]bool{"within the look": false, "beside the look": true} {
		t.Run(name, func(t *testing.T) {
			job := ownJob()
			scheme, err := trainjob.NewScheme()
			require.NoError(t, err)
			var (
				patches atomic.Int32
				fail    atomic.Bool
			)
			release := make(chan struct{})
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(job).WithInterceptorFuncs(interceptor.Funcs{
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
					patches.Add(1)
					<-release
					if fail.Load() {
						return errors.New("the apiserver is away")
					}
					return c.Patch(ctx, obj, p, opts...)
				}}).Build()
			e := &Engine{Cluster: Cluster{Cache: c, API: c, Writer: c}, RecordStartAside: aside}
			v := trainjob.Verdict{MarkStarted: t0.Add(time.Minute)}
			look := func() {
				done := make(chan struct{})
				go func() { e.markStarted(t.Context(), job, v); close(done) }()
				if aside {
					select { // returns with the write still held
					case <-done:
					case <-time.After(time.Minute):
						t.Fatal("the look waited for the start to be recorded")
					}
					return
				}
				assert.Eventually(t, func() bool { return patches.Load() > 0 }, time.Minute, time.Millisecond)
				close(release)
				<-done
				release = make(chan struct{})
			}

			fail.Store(true)
			look()
			if aside {
				require.Eventually(t, func() bool { return patches.Load() == 1 }, time.Minute, time.Millisecond)
				e.markStarted(t.Context(), job, v) // meets the record in flight: no second write
				assert.Equal(t, int32(1), patches.Load())
				close(release)
				require.Eventually(t, func() bool { return !e.marks.has(client.ObjectKeyFromObject(job)) }, time.Minute, time.Millisecond,
					"a failed record is forgotten, so a later look tries again")
				release = make(chan struct{})
			}

			fail.Store(false)
			look()
			if aside {
				close(release)
			}
			require.Eventually(t, func() bool {
				got := &trainer.TrainJob{}
				return c.Get(t.Context(), client.ObjectKeyFromObject(job), got) == nil && !trainjob.StartedAt(got).IsZero()
			}, time.Minute, time.Millisecond, "the second look records the start")
			assert.Equal(t, int32(2), patches.Load(), "one write per look that needed one")
		})
	}
}
