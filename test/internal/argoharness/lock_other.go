//go:build !unix

package argoharness

import (
	"context"
	"os"
)

// acquireLock has no file lock to take off Unix (argoexec's /var/run/argo is Unix-only anyway).
func acquireLock(context.Context) (*os.File, error) { return os.CreateTemp("", "argoharness-lock-") }

func releaseLock(f *os.File) {
	f.Close()
	_ = os.Remove(f.Name())
}
