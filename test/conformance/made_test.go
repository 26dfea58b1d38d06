package conformance_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
)

// madeTrainJobs records every TrainJob made in a namespace while a scenario runs, with its owner:
// a job a step made and deleted (a retry's predecessor, a job a deadline ended) is gone from any
// list by the time the step ends, and the pair table states how many a step made.
type madeTrainJobs struct {
	mu      sync.Mutex
	byOwner map[string][]string // owner UID → the TrainJobs' names, in the order they appeared
	err     error               // why the watch ended before the test did
}

// recordMade watches ns's TrainJobs until the test ends. A watch from no resourceVersion begins
// with an ADDED event for each TrainJob already there, so none made after this call is missed.
func recordMade(t *testing.T, ns string) *madeTrainJobs {
	t.Helper()
	wc, err := client.NewWithWatch(stack.Config, client.Options{Scheme: stack.Scheme})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	w, err := wc.Watch(ctx, &trainer.TrainJobList{}, client.InNamespace(ns))
	if err != nil {
		cancel()
		require.NoError(t, err, "watching the TrainJobs of %s", ns)
	}
	m := &madeTrainJobs{byOwner: map[string][]string{}}
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			tj, ok := ev.Object.(*trainer.TrainJob)
			if ev.Type != watch.Added || !ok {
				continue
			}
			m.add(tj.Labels[trainjob.LabelOwnerUID], tj.Name)
		}
		if ctx.Err() == nil {
			m.mu.Lock()
			m.err = errors.New("the apiserver ended the watch of TrainJobs before the step ended: the record may be short")
			m.mu.Unlock()
		}
	}()
	return m
}

func (m *madeTrainJobs) add(owner, name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !slices.Contains(m.byOwner[owner], name) {
		m.byOwner[owner] = append(m.byOwner[owner], name)
	}
}

// by is the TrainJobs owner made, and why the record may be short (nil when it is whole).
func (m *madeTrainJobs) by(owner string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.byOwner[owner]), m.err
}

// jobCount is what a step did with TrainJobs: how many it made, and how many of them are left
// once it ended (kept, or left as they failed for their logs).
type jobCount struct{ made, left int }

// checkJobs asserts the step's TrainJobs against w: the record is read until it holds as many
// as wanted (a watch event may trail the step's end by a moment), then compared.
func checkJobs(t *testing.T, w jobCount, got result) {
	t.Helper()
	r := got.step
	require.NotEmpty(t, r.owner, "the face must say whose TrainJobs are the step's")
	var names []string
	assert.Eventually(t, func() bool {
		var err error
		names, err = r.made.by(r.owner)
		require.NoError(t, err)
		return len(names) >= w.made
	}, timeout, interval, "the step must make %d TrainJob(s)", w.made)
	assert.Len(t, names, w.made, "the TrainJobs the step made: %v", names)
	var left []string
	assert.Eventually(t, func() bool {
		left = left[:0]
		for _, tj := range r.trainJobs(t) {
			if tj.Labels[trainjob.LabelOwnerUID] == r.owner && tj.DeletionTimestamp == nil {
				left = append(left, tj.Name)
			}
		}
		return len(left) == w.left
	}, timeout, interval, "the step must leave %d of its TrainJobs", w.left)
	assert.Len(t, left, w.left, "the TrainJobs the step left: %v", left)
}
