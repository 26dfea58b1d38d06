package podrunner

import "syscall"

// containerProcAttr puts a container's process in a mount namespace of its own (Go marks its
// mounts private, so the pod's bind mounts stay inside) and a PID namespace of its own, as a
// container has: when its first process ends, however it ends, the kernel kills the rest (the
// argoexec that emissary started), and the kernel kills that first process if the test binary
// dies without stopping it.
func containerProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Cloneflags: syscall.CLONE_NEWPID, Pdeathsig: syscall.SIGKILL}
}
