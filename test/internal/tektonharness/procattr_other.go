//go:build !linux

package tektonharness

import "syscall"

// childProcAttr has no parent-death signal outside Linux; Stop still ends the child.
func childProcAttr() *syscall.SysProcAttr { return nil }
