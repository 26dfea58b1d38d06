package trainjob

import (
	"context"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The failing node's log tail is bounded here, once, for every face: it becomes part of the
// failure message (a Tekton condition, an Argo node message and its "message" output, the CLI's
// stderr), and one runaway line (a progress bar, a tensor dump) must not blow those up.
const (
	// TailLines is how many of the failing node's last log lines are asked for.
	TailLines = 20
	// TailBytes bounds the tail kept in a message; the end of the log is kept.
	TailBytes = 4 << 10
	// TailReadBytes bounds what is read from the kubelet for a tail (LimitBytes). The kubelet
	// applies LimitBytes from the start of the last TailLines lines, so it is larger than
	// TailBytes and BoundTail keeps the end.
	TailReadBytes = 16 * TailBytes
	// TailCut starts a tail that BoundTail shortened.
	TailCut = "…(earlier output cut)…\n"
)

// BoundTail keeps the end of a log within TailLines lines and TailBytes bytes, cut on a rune
// boundary, starting with TailCut when anything was dropped.
func BoundTail(tail string) string {
	tail = strings.TrimRight(tail, "\n")
	lines := strings.Split(tail, "\n")
	if len(lines) <= TailLines && len(tail) <= TailBytes {
		return tail
	}
	if len(lines) > TailLines-1 {
		lines = lines[len(lines)-(TailLines-1):] // TailCut takes a line
	}
	tail = strings.Join(lines, "\n")
	if room := TailBytes - len(TailCut); len(tail) > room {
		tail = tail[len(tail)-room:]
		for tail != "" && !utf8.RuneStart(tail[0]) {
			tail = tail[1:]
		}
	}
	return TailCut + tail
}

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
	b, err := k.Client.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, TailLines: ptr.To(lines), LimitBytes: ptr.To(int64(TailReadBytes))}).DoRaw(ctx)
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
