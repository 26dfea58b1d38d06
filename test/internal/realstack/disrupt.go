package realstack

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EvictAnnotation asks kwok (stages/pod-evict.yaml) to evict a running pod as the kubelet does
// under node pressure; its value becomes the pod's status message.
const EvictAnnotation = "realstack.trainstep.dev/evict"

// Evict has kwok evict a running pod: phase Failed, reason Evicted, message msg. Its Job then
// counts a failure and makes a replacement.
func (s *Stack) Evict(ctx context.Context, namespace, pod, msg string) error {
	return s.annotatePod(ctx, namespace, pod, EvictAnnotation, msg)
}

// OOMRestartAnnotation asks kwok (stages/pod-oom-restart.yaml) to restart a running pod's
// containers in place, as the kubelet does after the kernel killed one for memory.
const OOMRestartAnnotation = "realstack.trainstep.dev/oom-restart"

// OOMRestart has kwok restart a running pod in place once: restartCount 1, last state OOMKilled
// (exit code 137), running and Ready again.
func (s *Stack) OOMRestart(ctx context.Context, namespace, pod string) error {
	return s.annotatePod(ctx, namespace, pod, OOMRestartAnnotation, "true")
}

func (s *Stack) annotatePod(ctx context.Context, namespace, pod, key, value string) error {
	p := &corev1.Pod{}
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: pod}, p); err != nil {
		return err
	}
	orig := p.DeepCopy()
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[key] = value
	return s.Client.Patch(ctx, p, client.MergeFrom(orig))
}

// Cordon marks every kwok Node unschedulable, as after a node failure: new pods stay Pending,
// Unschedulable, until the returned uncordon (also run when the test ends). Pods already bound
// keep running. Tests that call it must not run in parallel: it stops every test's new pods.
func (s *Stack) Cordon(t testing.TB) (uncordon func()) {
	t.Helper()
	set := func(ctx context.Context, unschedulable bool) error {
		for _, name := range s.Nodes {
			n := &corev1.Node{}
			if err := s.Client.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
				return err
			}
			orig := n.DeepCopy()
			n.Spec.Unschedulable = unschedulable
			if err := s.Client.Patch(ctx, n, client.MergeFrom(orig)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := set(context.Background(), true); err != nil {
		t.Fatalf("cordoning the Nodes: %v", err)
	}
	done := false
	uncordon = func() {
		if done {
			return
		}
		done = true
		if err := set(context.Background(), false); err != nil {
			t.Errorf("uncordoning the Nodes: %v", err)
		}
	}
	t.Cleanup(uncordon)
	return uncordon
}
