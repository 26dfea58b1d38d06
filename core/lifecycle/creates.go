package lifecycle

import (
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// createSeenWithin bounds how long a TrainJob this process created may be missing from the
// face's cache before the apiserver is asked whether it still exists. A watch shows a create
// within milliseconds; this only matters when it never does.
const createSeenWithin = time.Minute

// Creates are the TrainJobs this process created that the face's cache has not shown yet
// (name → when). A look between the create and its watch event (the face's own status write
// wakes one) then waits for the event instead of reading the TrainJob from the apiserver.
// Entries go when the cache shows the job (Seen, the TrainJob informer's handler); the map
// holds only creates in flight.
type Creates struct {
	mu sync.Mutex
	m  map[client.ObjectKey]time.Time
}

// NewCreates makes an empty record.
func NewCreates() *Creates { return &Creates{m: map[client.ObjectKey]time.Time{}} }

func (c *Creates) add(k client.ObjectKey, at time.Time) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[k] = at
}

func (c *Creates) done(k client.ObjectKey) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, k)
}

// inFlight says when this process created k, while the cache has not shown it.
func (c *Creates) inFlight(k client.ObjectKey) (time.Time, bool) {
	if c == nil {
		return time.Time{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.m[k]
	return at, ok
}

// Seen is the TrainJob informer's add handler: the cache now holds the job.
func (c *Creates) Seen(obj any) {
	if o, ok := obj.(client.Object); ok {
		c.done(client.ObjectKeyFromObject(o))
	}
}

// maxMarks bounds the remembered starts; past it the memory starts afresh (a start recorded
// twice is harmless: the same annotation, a little later).
const maxMarks = 4096

// marks are the TrainJobs whose start this process recorded and whose cache entry does not
// show it yet.
type marks struct {
	mu sync.Mutex
	m  map[client.ObjectKey]struct{}
}

// claim adds key unless it is there, and says whether it added it: one recording of a start
// at a time, however many looks meet the job meanwhile.
func (k *marks) claim(key client.ObjectKey) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.m[key]; ok {
		return false
	}
	if k.m == nil || len(k.m) >= maxMarks {
		k.m = map[client.ObjectKey]struct{}{}
	}
	k.m[key] = struct{}{}
	return true
}

func (k *marks) has(key client.ObjectKey) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.m[key]
	return ok
}

func (k *marks) done(key client.ObjectKey) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.m, key)
}
