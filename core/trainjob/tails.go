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
	m  map[string]tail
}

// tail is one remembered log tail and the pod and container it was read from.
type tail struct {
	pod, container, text string
}

// NewTails makes an empty memory.
func NewTails() *Tails { return &Tails{m: map[string]tail{}} }

// WithTail is tailer.WithTail for v.TailPod, from memory when that pod was read before. A failed
// job whose pods the snapshot no longer had (v.TailPod empty) is remembered by the TrainJob: the
// tailer's blame picks among its pods, and a failed job's pods stay what they were.
func (t *Tails) WithTail(ctx context.Context, tailer Tailer, v Verdict) Observation {
	key := tailKey(v)
	if key != "" {
		t.mu.Lock()
		got, ok := t.m[key]
		t.mu.Unlock()
		if ok {
			return v.WithLogTail(got.pod, got.container, got.text)
		}
	}
	obs := tailer.WithTail(ctx, v)
	if obs.LogTail == "" || obs.FailedPod == "" {
		return obs
	}
	// Under the pod actually read, too: a later verdict that names it finds it.
	read := tail{pod: obs.FailedPod, container: obs.FailedContainer, text: obs.LogTail}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.m) >= maxTails {
		t.m = map[string]tail{}
	}
	t.m[podKey(obs.Namespace, read.pod, read.container)] = read
	if key != "" {
		t.m[key] = read
	}
	return obs
}

// tailKey is what the tail v asks for is remembered by: its pod and container, else the failed
// TrainJob whose pods the tailer lists; "" when neither is known, never a bare namespace.
func tailKey(v Verdict) string {
	switch {
	case v.TailPod != "":
		return podKey(v.Namespace, v.TailPod, v.TailContainer)
	case v.Name != "" && v.Phase == PhaseFailed:
		return "trainjob/" + v.Namespace + "/" + v.Name
	}
	return ""
}

func podKey(namespace, pod, container string) string {
	if container == "" {
		container = NodeContainer
	}
	return "pod/" + namespace + "/" + pod + "/" + container
}
