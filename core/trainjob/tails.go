package trainjob

import (
	"context"
	"sync"
)

// maxTails bounds the remembered tails; past it the memory starts afresh.
const maxTails = 1024

// Tails remembers the log tails of failed pods, for faces that answer about a running step many
// times (each Argo call, each Tekton reconcile). A failed pod's log no longer changes, so a node
// its Job is retrying costs one pods/log read per failed pod, not one per answer.
type Tails struct {
	mu sync.Mutex
	m  map[string]string
}

// NewTails makes an empty memory.
func NewTails() *Tails { return &Tails{m: map[string]string{}} }

// WithTail is tailer.WithTail for v.TailPod, from memory when that pod was read before.
func (t *Tails) WithTail(ctx context.Context, tailer Tailer, v Verdict) Observation {
	key := v.Namespace + "/" + v.TailPod
	t.mu.Lock()
	tail, ok := t.m[key]
	t.mu.Unlock()
	if ok {
		return v.WithLogTail(v.TailPod, v.TailContainer, tail)
	}
	obs := tailer.WithTail(ctx, v)
	if obs.LogTail != "" {
		t.mu.Lock()
		if len(t.m) >= maxTails {
			t.m = map[string]string{}
		}
		t.m[key] = obs.LogTail
		t.mu.Unlock()
	}
	return obs
}
