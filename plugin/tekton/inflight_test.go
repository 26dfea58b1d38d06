package tekton

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A run is stale while the cache holds the version our write replaced, and not once it holds
// any other: the entry then goes, so a later write by someone else never holds the run; nor
// past writeSeenWithin, nor after a write that changed nothing (no event will come).
func TestWritesStaleUntilTheCacheMoves(t *testing.T) {
	w := newWrites()
	k := client.ObjectKey{Namespace: "ns", Name: "run"}
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	assert.False(t, w.stale(k, "5", now), "nothing written")
	w.wrote(k, "5", "6", now)
	assert.True(t, w.stale(k, "5", now))
	assert.True(t, w.stale(k, "5", now.Add(time.Second)), "still the old version")
	assert.False(t, w.stale(k, "9", now), "the cache moved on (our write or a later one)")
	assert.False(t, w.stale(k, "5", now), "forgotten once the cache moved")

	w.wrote(k, "9", "10", now)
	assert.False(t, w.stale(k, "9", now.Add(writeSeenWithin)), "waited long enough: read it as it is")
	w.wrote(k, "9", "9", now)
	assert.False(t, w.stale(k, "9", now), "a write that changed nothing")
	w.wrote(k, "9", "10", now)
	w.forget(k)
	assert.False(t, w.stale(k, "9", now))
}
