package tekton

import (
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// createSeenWithin bounds how long a TrainJob this process created may be missing from the
// cache before the apiserver is asked whether it still exists. The TrainJob watch shows a create
// within milliseconds; this only matters when it never does.
const createSeenWithin = time.Minute

// creates are the TrainJobs this process has created that its cache has not shown yet (name →
// when). A reconcile between the create and its watch event — the run's own status write wakes
// one — then waits for the event instead of reading the TrainJob from the apiserver. Entries go
// when the informer shows the job; the map holds only creates in flight.
type creates struct {
	mu sync.Mutex
	m  map[client.ObjectKey]time.Time
}

func newCreates() *creates { return &creates{m: map[client.ObjectKey]time.Time{}} }

func (c *creates) add(k client.ObjectKey, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[k] = at
}

func (c *creates) done(k client.ObjectKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, k)
}

func (c *creates) since(k client.ObjectKey) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.m[k]
	return at, ok
}

// seen is the TrainJob informer's handler: the cache now holds the job.
func (c *creates) seen(obj any) {
	if o, ok := obj.(client.Object); ok {
		c.done(client.ObjectKeyFromObject(o))
	}
}

// writes are the CustomRuns whose status this process wrote and whose cache entry has not
// caught up yet, by the resourceVersion the write replaced. A reconcile woken meanwhile (the
// TrainJob's or a pod's event racing the run's own) would read the run as it was before the
// write and write again on top of it, which the apiserver refuses with a conflict: a wasted
// request and a wasted reconcile. It is skipped instead; the write's own watch event wakes the
// run again. Once the cache holds any other version (ours, or a later one) the entry goes, so
// a missed event cannot hold a run: versions of one object only move forward in the watch.
// Past writeSeenWithin the entry is ignored all the same, falling back to a read that may
// conflict.
type writes struct {
	mu sync.Mutex
	m  map[client.ObjectKey]write
}

type write struct {
	base string
	at   time.Time
}

// writeSeenWithin bounds how long a run's reconciles wait for the cache to show its last write.
const writeSeenWithin = 10 * time.Second

func newWrites() *writes { return &writes{m: map[client.ObjectKey]write{}} }

// wrote records a status write at that replaced version base with version now (the same
// version, an update the apiserver found to change nothing, has no event to wait for).
func (w *writes) wrote(k client.ObjectKey, base, now string, at time.Time) {
	if base == now {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.m[k] = write{base: base, at: at}
}

// stale reports whether cached, the version the cache holds, is one this process wrote over
// less than writeSeenWithin before now; when it is not, the entry is forgotten.
func (w *writes) stale(k client.ObjectKey, cached string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.m[k]
	if ok && e.base == cached && now.Sub(e.at) < writeSeenWithin {
		return true
	}
	delete(w.m, k)
	return false
}

func (w *writes) forget(k client.ObjectKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, k)
}
