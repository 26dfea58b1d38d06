package realstack

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// PrivateNodeLabel labels a Node PrivateNode made with its own name, and taints it so (key and
// value, NoSchedule): a step's pod.nodeSelector of it with a toleration of it places every pod of
// the step there, and no other pod goes there.
const PrivateNodeLabel = "realstack.trainstep.dev/private-node"

// PrivateNode adds a kwok Node for one test (the stack's Nodes' capacity, no accelerators),
// labelled and tainted PrivateNodeLabel, and returns its name once it is Ready; it is deleted when
// the test ends. A test whose step selects it may cordon it (CordonNode) while other tests run.
// Tainted, because other tests' pods scheduled there would be stranded when it is deleted: kwok
// plays no more of their stages (a failing node never fails) and serves no more of their logs.
func (s *Stack) PrivateNode(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("private-%d", s.privateNodes.Add(1))
	taint := corev1.Taint{Key: PrivateNodeLabel, Value: name, Effect: corev1.TaintEffectNoSchedule}
	if err := s.createNode(t.Context(), name, map[string]string{PrivateNodeLabel: name}, []corev1.Taint{taint}, GPUResource, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := client.IgnoreNotFound(s.Client.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})); err != nil {
			t.Errorf("deleting Node %s: %v", name, err)
		}
	})
	if err := waitFor(t.Context(), nil, "kwok to make Node "+name+" Ready", func(ctx context.Context) (bool, error) {
		return s.nodeSettled(ctx, name)
	}); err != nil {
		t.Fatal(err)
	}
	return name
}

// CordonNode marks Node name unschedulable, as after a node failure, until the returned uncordon
// (also run when the test ends): new pods that may run only there stay Pending, Unschedulable;
// pods already bound keep running.
func (s *Stack) CordonNode(t testing.TB, name string) (uncordon func()) {
	t.Helper()
	if err := s.setUnschedulable(context.Background(), name, true); err != nil {
		t.Fatalf("cordoning Node %s: %v", name, err)
	}
	done := false
	uncordon = func() {
		if done {
			return
		}
		done = true
		if err := s.setUnschedulable(context.Background(), name, false); err != nil {
			t.Errorf("uncordoning Node %s: %v", name, err)
		}
	}
	t.Cleanup(uncordon)
	return uncordon
}

func (s *Stack) setUnschedulable(ctx context.Context, name string, unschedulable bool) error {
	n := &corev1.Node{}
	if err := s.Client.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
		return err
	}
	orig := n.DeepCopy()
	n.Spec.Unschedulable = unschedulable
	return s.Client.Patch(ctx, n, client.MergeFrom(orig))
}
