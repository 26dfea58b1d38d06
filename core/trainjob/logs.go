package trainjob

import (
	"context"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// LogSource returns the end of a container's log. On a cluster the kubelet serves it
// (KubeletLogs); the test bed has no kubelet, so its Trainer simulator serves the real output of
// the trainer command it ran locally.
type LogSource interface {
	Tail(ctx context.Context, namespace, pod, container string, lines int64) (string, error)
}

// LogFollower streams a container's log as it is written.
type LogFollower interface {
	Follow(ctx context.Context, namespace, pod, container string, w io.Writer) error
}

// KubeletLogs reads pod logs through the apiserver's pods/log subresource.
type KubeletLogs struct {
	Client kubernetes.Interface
}

var (
	_ LogSource   = KubeletLogs{}
	_ LogFollower = KubeletLogs{}
)

// Tail implements LogSource.
func (k KubeletLogs) Tail(ctx context.Context, namespace, pod, container string, lines int64) (string, error) {
	b, err := k.Client.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, TailLines: ptr.To(lines)}).DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("reading the log of pod %s/%s: %w", namespace, pod, err)
	}
	return string(b), nil
}

// Follow implements LogFollower.
func (k KubeletLogs) Follow(ctx context.Context, namespace, pod, container string, w io.Writer) error {
	rc, err := k.Client.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, Follow: true}).Stream(ctx)
	if err != nil {
		return fmt.Errorf("streaming the log of pod %s/%s: %w", namespace, pod, err)
	}
	defer rc.Close()
	_, err = io.Copy(w, rc)
	return err
}
