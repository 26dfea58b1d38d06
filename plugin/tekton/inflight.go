package tekton

import (
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

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
