package argo

import (
	"bytes"
	"crypto/subtle"
	"fmt"
	"os"
	"sync"
	"time"
)

// tokenFile is the agent's bearer token, read from the file the agent's init container writes and
// read again whenever the file changes (its size, modification time or identity).
type tokenFile struct {
	path string

	mu    sync.Mutex
	stamp fileStamp
	token []byte
}

type fileStamp struct {
	size int64
	mod  time.Time
	file os.FileInfo
}

func newTokenFile(path string) (*tokenFile, error) {
	t := &tokenFile{path: path}
	if _, err := t.current(); err != nil {
		return nil, err
	}
	return t, nil
}

// current returns the token, re-reading the file if it changed since the last read.
func (t *tokenFile) current() ([]byte, error) {
	info, err := os.Stat(t.path)
	if err != nil {
		return nil, fmt.Errorf("reading the agent token %s: %w (the sidecar must run as uid 8737 or with runAsGroup: 0)", t.path, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token != nil && t.stamp.size == info.Size() && t.stamp.mod.Equal(info.ModTime()) && os.SameFile(t.stamp.file, info) {
		return t.token, nil
	}
	b, err := os.ReadFile(t.path)
	if err != nil {
		return nil, fmt.Errorf("reading the agent token %s: %w (the sidecar must run as uid 8737 or with runAsGroup: 0)", t.path, err)
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, fmt.Errorf("the agent token file %s is empty", t.path)
	}
	t.token, t.stamp = b, fileStamp{size: info.Size(), mod: info.ModTime(), file: info}
	return b, nil
}

// allows reports whether an Authorization header carries exactly "Bearer <token>", comparing in
// constant time.
func (t *tokenFile) allows(header string) (bool, error) {
	token, err := t.current()
	if err != nil {
		return false, err
	}
	want := append([]byte("Bearer "), token...)
	return subtle.ConstantTimeCompare([]byte(header), want) == 1, nil
}
