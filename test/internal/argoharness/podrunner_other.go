//go:build !linux

package argoharness

import "syscall"

// containerProcAttr: mount namespaces are Linux's; elsewhere the pod's bind mounts fail, and
// RunPod with them (argoexec needs root and /var/run/argo anyway).
func containerProcAttr() *syscall.SysProcAttr { return nil }
