package argoharness

import "syscall"

// containerProcAttr puts a container's process in a mount namespace of its own (Go marks its
// mounts private, so the pod's bind mounts stay inside) and has the kernel kill it if the test
// binary dies without stopping it.
func containerProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
}
