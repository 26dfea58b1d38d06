package argo

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServerTimeouts: every timeout is set, and the write deadline outlasts the longest held call
// (the body read, then the handler's agentTimeout-2s budget, whatever --hold-max says).
func TestServerTimeouts(t *testing.T) {
	srv := newServer(context.Background(), http.NotFoundHandler())
	assert.Positive(t, srv.ReadHeaderTimeout)
	assert.Positive(t, srv.ReadTimeout)
	assert.Positive(t, srv.IdleTimeout)
	assert.Positive(t, srv.MaxHeaderBytes)
	assert.Greater(t, srv.WriteTimeout, srv.ReadTimeout+agentTimeout-2*time.Second, "a held call must be able to answer")
	assert.Greater(t, srv.WriteTimeout, agentTimeout-5*time.Second, "above the largest --hold-max")
	assert.LessOrEqual(t, srv.ReadHeaderTimeout, srv.ReadTimeout)
}

// TestSlowClientIsCut: a connection that never finishes its request headers is closed after
// ReadHeaderTimeout instead of holding a goroutine and a socket for ever.
func TestSlowClientIsCut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := newServer(t.Context(), http.NotFoundHandler())
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	conn, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write([]byte("POST " + ExecutePath + " HTTP/1.1\r\nHost: x\r\n")) // no end of headers
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(readHeaderTimeout+10*time.Second)))
	_, err = io.ReadAll(bufio.NewReader(conn))
	var ne net.Error
	assert.False(t, errors.As(err, &ne) && ne.Timeout(), "the server must close the connection, not the client give up: %v", err)
}

func TestMetricsStayOnLoopbackByDefault(t *testing.T) {
	o := Options{Namespace: "ns"}
	o.Default()
	host, _, err := net.SplitHostPort(o.MetricsAddr)
	require.NoError(t, err)
	ip := net.ParseIP(host)
	require.NotNil(t, ip, o.MetricsAddr)
	assert.True(t, ip.IsLoopback(), "metrics are unauthenticated: %s must be loopback", o.MetricsAddr)
	assert.NotEqual(t, o.Addr, o.MetricsAddr)
}

// TestCallMemoIsBounded: the parsed-request memo keeps at most memoMaxCalls bodies and
// memoMaxBytes in all, skips bodies over memoMaxBody, and gives back what was put.
func TestCallMemoIsBounded(t *testing.T) {
	m := newCallMemo()
	first := &call{template: "first"}
	m.put([]byte("body-0"), first)
	got, ok := m.get([]byte("body-0"))
	require.True(t, ok)
	assert.Same(t, first, got)
	for i := range 3 * memoMaxCalls {
		m.put([]byte(fmt.Sprintf("body-%d", i)), &call{})
	}
	assert.LessOrEqual(t, len(m.calls), memoMaxCalls)
	big := make([]byte, memoMaxBody/2)
	for i := range 3 * memoMaxBytes / len(big) {
		big[0] = byte(i)
		big[1] = byte(i >> 8)
		m.put(big, &call{})
	}
	assert.LessOrEqual(t, m.bytes, memoMaxBytes)
	sum := 0
	for k := range m.calls {
		sum += len(k)
	}
	assert.Equal(t, sum, m.bytes, "the byte count follows the bodies kept")
	m.put(make([]byte, memoMaxBody+1), &call{})
	_, ok = m.get(make([]byte, memoMaxBody+1))
	assert.False(t, ok, "a body over memoMaxBody is not kept")
}
