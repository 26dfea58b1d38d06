package trainersim

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/trainstep/trainstep/core/trainjob"
)

// LogStore keeps what each simulated pod printed. It stands in for the kubelet, which the test bed
// lacks: the lines are the real output of the trainer command the simulator ran locally.
type LogStore struct {
	mu      sync.Mutex
	lines   map[string][]string
	closed  map[string]bool
	changed chan struct{}
}

var (
	_ trainjob.LogSource   = (*LogStore)(nil)
	_ trainjob.LogFollower = (*LogStore)(nil)
)

// NewLogStore returns an empty store.
func NewLogStore() *LogStore {
	return &LogStore{lines: map[string][]string{}, closed: map[string]bool{}, changed: make(chan struct{})}
}

func key(namespace, pod string) string { return namespace + "/" + pod }

// Append adds a line to a pod's log.
func (s *LogStore) Append(namespace, pod, line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key(namespace, pod)
	s.lines[k] = append(s.lines[k], line)
	s.broadcast()
}

// Close marks a pod's log complete.
func (s *LogStore) Close(namespace, pod string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed[key(namespace, pod)] = true
	s.broadcast()
}

func (s *LogStore) broadcast() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Tail implements trainjob.LogSource.
func (s *LogStore) Tail(_ context.Context, namespace, pod, _ string, n int64) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lines, ok := s.lines[key(namespace, pod)]
	if !ok {
		return "", fmt.Errorf("pod %s/%s has no log", namespace, pod)
	}
	if int64(len(lines)) > n {
		lines = lines[int64(len(lines))-n:]
	}
	return strings.Join(lines, "\n") + "\n", nil
}

// Follow implements trainjob.LogFollower: it writes lines as they come until the log is closed.
func (s *LogStore) Follow(ctx context.Context, namespace, pod, _ string, w io.Writer) error {
	sent := 0
	k := key(namespace, pod)
	for {
		s.mu.Lock()
		lines, closed, changed := s.lines[k][sent:], s.closed[k], s.changed
		sent += len(lines)
		s.mu.Unlock()
		for _, l := range lines {
			if _, err := fmt.Fprintln(w, l); err != nil {
				return err
			}
		}
		if closed {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
