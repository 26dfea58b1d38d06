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
