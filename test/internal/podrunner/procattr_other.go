//go:build !linux

package podrunner

import "syscall"

// containerProcAttr: mount namespaces are Linux's; elsewhere the pod's bind mounts fail, and
// RunPod with them.
func containerProcAttr() *syscall.SysProcAttr { return nil }
