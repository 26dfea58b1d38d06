package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kcmControllers are the kube-controller-manager controllers an apiserver-only control plane
// lacks and tests rely on: cascade deletion, namespace deletion that finishes, and the default
// ServiceAccount in new namespaces. serviceaccount-token-controller is left out: since 1.24 no
// ServiceAccount gets a token Secret unless one is asked for, and tests use TokenRequest.
const kcmControllers = "garbage-collector-controller,namespace-controller,serviceaccount-controller"

// kcmStopTimeout bounds the graceful stop before the process is killed.
const kcmStopTimeout = 10 * time.Second

// controllerManager is a kube-controller-manager process started by Start.
type controllerManager struct {
	cmd     *exec.Cmd
	logPath string
	log     *os.File
	exited  chan struct{} // closed once the process has exited and cmd.Wait returned
	waitErr error         // set before exited is closed
}

// startControllerManager runs binary against the apiserver of kubeconfig, logging to logPath.
// The process outlives ctx; only stop ends it.
func startControllerManager(binary, kubeconfig, logPath string) (*controllerManager, error) {
	if _, err := os.Stat(binary); err != nil {
		return nil, fmt.Errorf("finding kube-controller-manager: %w; run `make test-assets` to build it", err)
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating the kube-controller-manager log: %w", err)
	}
	cmd := exec.Command(binary,
		"--kubeconfig="+kubeconfig,
		"--leader-elect=false", // one instance; skips a Lease round trip before controllers start
		"--secure-port=0",      // no health endpoint to serve, and no port to collide on
		"--controllers="+kcmControllers,
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting kube-controller-manager from %s: %w", binary, err)
	}
	m := &controllerManager{cmd: cmd, logPath: logPath, log: logFile, exited: make(chan struct{})}
	go func() {
		m.waitErr = cmd.Wait()
		close(m.exited)
	}()
	return m, nil
}

// waitReady waits until the serviceaccount controller has created the default ServiceAccount
// of the default namespace: proof that the process runs, reaches the apiserver with admin
// rights and has started its controllers.
func (m *controllerManager) waitReady(ctx context.Context, c client.Client) error {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	key := client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: "default"}
	err := wait.PollUntilContextCancel(ctx, Interval, true, func(ctx context.Context) (bool, error) {
		select {
		case <-m.exited:
			return false, m.exitError()
		default:
		}
		err := c.Get(ctx, key, &corev1.ServiceAccount{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("waiting for kube-controller-manager to create ServiceAccount default/default: %w\n%s",
			err, m.logTail())
	}
	return nil
}

// exitError says how the process ended; call it only once exited is closed.
func (m *controllerManager) exitError() error {
	if m.waitErr == nil {
		return errors.New("kube-controller-manager exited")
	}
	return fmt.Errorf("kube-controller-manager exited: %w", m.waitErr)
}

// stop ends the process: SIGTERM, then SIGKILL if it has not exited within kcmStopTimeout.
func (m *controllerManager) stop() error {
	defer m.log.Close()
	select {
	case <-m.exited:
		return nil // already gone; waitReady or the caller reported why
	default:
	}
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stopping kube-controller-manager (pid %d): %w", m.cmd.Process.Pid, err)
	}
	select {
	case <-m.exited:
		return nil
	case <-time.After(kcmStopTimeout):
	}
	if err := m.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing kube-controller-manager (pid %d): %w", m.cmd.Process.Pid, err)
	}
	<-m.exited
	return nil
}

// logTail returns the end of the log, for errors: the whole file lives in a temp dir that
// Stop removes.
func (m *controllerManager) logTail() string {
	data, err := os.ReadFile(m.logPath)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", m.logPath, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return "kube-controller-manager log (last lines):\n" + strings.Join(lines, "\n")
}
