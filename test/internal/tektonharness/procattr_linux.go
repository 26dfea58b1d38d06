package tektonharness

import "syscall"

// childProcAttr makes the kernel kill a child we started if the test binary dies without
// running Stop (a panic, a timeout, kill -9), so no Tekton controller is left behind.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
