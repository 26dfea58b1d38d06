// Package harnessutil holds the small pieces every test harness here needs: free loopback ports
// for the processes a suite starts, and a buffer a process writes while a test reads it.
package harnessutil

import (
	"bytes"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// FreePorts returns n distinct loopback ports free now: held open together, then released, so
// another process could still take one before it is used (it has not happened here).
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// SyncBuffer is a bytes.Buffer a process writes while a test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// FreeAddr is a loopback host:port free now, for a server a test starts.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ports, err := FreePorts(1)
	require.NoError(t, err)
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
}
