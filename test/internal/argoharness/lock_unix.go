//go:build unix

package argoharness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// acquireLock takes an exclusive lock on lockFile, waiting while another process holds it.
// The kernel releases it when the process ends, however it ends.
func acquireLock(ctx context.Context) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(lockFile), 0o755); err != nil {
		return nil, fmt.Errorf("creating %s (argoexec hard-codes /var/run/argo; run as root): %w", filepath.Dir(lockFile), err)
	}
	f, err := os.OpenFile(lockFile, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	said := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !said {
			fmt.Fprintf(os.Stderr, "argoharness: waiting for another Argo suite to release %s\n", lockFile)
			said = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for %s (another Argo suite runs): %w", lockFile, ctx.Err())
		case <-time.After(Poll): // flock has no wait with a deadline
		}
	}
}

func releaseLock(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	f.Close()
}
