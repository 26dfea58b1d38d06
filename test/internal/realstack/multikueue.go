package realstack

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MultiKueue on two real stacks: a manager (a whole stack, whose Trainer v2.3.0 leaves a TrainJob
// with spec.managedBy kueue.x-k8s.io/multikueue to Kueue, and Kueue without waitForPodsReady: its
// jobs have no pods there) and a worker (a whole stack with Kueue), both on loopback. The
// manager's Kueue reaches the worker through a MultiKueueCluster whose kubeconfig is a Secret
// (inline certificates, as Kueue requires), checked by the MultiKueue AdmissionCheck of every
// ClusterQueue MultiKueueQueue makes.

// Names of the MultiKueue objects on the manager.
const (
	MultiKueueWorker = "worker"
	MultiKueueCheck  = "multikueue"
)

// StartMultiKueue starts a worker stack with Kueue and adds to s (the manager) Kueue and the
// MultiKueue objects pointing at the worker. It returns the worker, which tearDown stops.
func StartMultiKueue(ctx context.Context, s *Stack) (worker *Stack, tearDown func(), err error) {
	worker, err = Start(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("starting the worker stack: %w", err)
	}
	tearDown = func() {
		if err := worker.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "realstack: stopping the worker stack: %v\n", err)
		}
	}
	defer func() {
		if err != nil {
			worker.KeepLogs = true
			tearDown()
		}
	}()
	if err := worker.startKueue(ctx, true); err != nil {
		return nil, nil, fmt.Errorf("worker: %w", err)
	}
	if err := s.startKueue(ctx, false); err != nil {
		return nil, nil, fmt.Errorf("manager: %w", err)
	}
	kubeconfig, err := worker.inlineKubeconfig()
	if err != nil {
		return nil, nil, err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: KueueNamespace, Name: "worker-kubeconfig"},
		Data:       map[string][]byte{"kubeconfig": kubeconfig},
	}
	if err := s.Client.Create(ctx, secret); err != nil {
		return nil, nil, fmt.Errorf("creating the worker's kubeconfig Secret: %w", err)
	}
	objs := []*unstructured.Unstructured{
		kueueObject("MultiKueueCluster", "", MultiKueueWorker, map[string]any{"spec": map[string]any{
			"clusterSource": map[string]any{"kubeConfig": map[string]any{"locationType": "Secret", "location": secret.Name}},
		}}),
		kueueObject("MultiKueueConfig", "", MultiKueueCheck, map[string]any{"spec": map[string]any{
			"clusters": []any{MultiKueueWorker},
		}}),
		kueueObject("AdmissionCheck", "", MultiKueueCheck, map[string]any{"spec": map[string]any{
			"controllerName": "kueue.x-k8s.io/multikueue",
			"parameters":     map[string]any{"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": MultiKueueCheck},
		}}),
	}
	for _, o := range objs {
		if err := s.Client.Create(ctx, o); err != nil {
			return nil, nil, fmt.Errorf("creating %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	if err := waitFor(ctx, nil, "the MultiKueueCluster and AdmissionCheck to be Active", func(ctx context.Context) (bool, error) {
		for _, o := range []*unstructured.Unstructured{objs[0], objs[2]} {
			got := o.DeepCopy()
			if err := s.Client.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
				return false, err
			}
			if !conditionTrue(got, "Active") {
				conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
				return false, fmt.Errorf("%s %s is not Active: %v", o.GetKind(), o.GetName(), conds)
			}
		}
		return true, nil
	}); err != nil {
		return nil, nil, err
	}
	return worker, tearDown, nil
}

// inlineKubeconfig is an admin kubeconfig of s with the certificates inline: Kueue refuses
// file paths in a MultiKueue kubeconfig.
func (s *Stack) inlineKubeconfig() ([]byte, error) {
	var data [3][]byte
	for i, f := range []string{s.Config.CAFile, s.Config.CertFile, s.Config.KeyFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		data[i] = b
	}
	enc := base64.StdEncoding.EncodeToString
	conf := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: worker
  cluster: {server: %q, certificate-authority-data: %s}
users:
- name: admin
  user: {client-certificate-data: %s, client-key-data: %s}
contexts:
- name: worker
  context: {cluster: worker, user: admin}
current-context: worker
`, s.Config.Host, enc(data[0]), enc(data[1]), enc(data[2]))
	if _, err := clientcmd.Load([]byte(conf)); err != nil {
		return nil, fmt.Errorf("writing the worker's kubeconfig: %w", err)
	}
	return []byte(conf), nil
}

// MultiKueueQueue makes a queue of gpus GPUs on both stacks for one test: on the worker, the
// namespace of the same name and a ClusterQueue and LocalQueue as KueueQueue makes; on the
// manager, a ClusterQueue and LocalQueue of the same name whose ClusterQueue has the MultiKueue
// admission check. It returns the queue's name.
func (s *Stack) MultiKueueQueue(t testing.TB, worker *Stack, namespace string, gpus int) string {
	t.Helper()
	worker.namespaceNamed(t, namespace)
	q := worker.KueueQueue(t, namespace, gpus)
	ctx := t.Context()
	cq := kueueObject("ClusterQueue", "", q, map[string]any{"spec": map[string]any{
		"namespaceSelector": map[string]any{},
		"admissionChecksStrategy": map[string]any{"admissionChecks": []any{
			map[string]any{"name": MultiKueueCheck},
		}},
		"resourceGroups": []any{map[string]any{
			"coveredResources": []any{"cpu", "memory", GPUResource},
			"flavors": []any{map[string]any{
				"name": KueueFlavor,
				"resources": []any{
					map[string]any{"name": "cpu", "nominalQuota": "1000"},
					map[string]any{"name": "memory", "nominalQuota": "10Ti"},
					map[string]any{"name": GPUResource, "nominalQuota": fmt.Sprint(gpus)},
				},
			}},
		}},
	}})
	lq := kueueObject("LocalQueue", namespace, q, map[string]any{"spec": map[string]any{"clusterQueue": q}})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for _, o := range []*unstructured.Unstructured{lq, cq} {
			if err := client.IgnoreNotFound(s.Client.Delete(ctx, o)); err != nil {
				t.Errorf("deleting %s %s on the manager: %v", o.GetKind(), o.GetName(), err)
			}
		}
	})
	for _, o := range []*unstructured.Unstructured{cq, lq} {
		if err := s.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %s %s on the manager: %v", o.GetKind(), o.GetName(), err)
		}
	}
	if err := waitFor(ctx, nil, "queue "+q+" on the manager to be Active", func(ctx context.Context) (bool, error) {
		for _, o := range []*unstructured.Unstructured{cq, lq} {
			got := o.DeepCopy()
			if err := s.Client.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
				return false, err
			}
			if !conditionTrue(got, "Active") {
				return false, fmt.Errorf("%s %s is not Active", o.GetKind(), o.GetName())
			}
		}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	return q
}

// namespaceNamed creates namespace name (MultiKueue creates the remote job in the namespace of
// the same name) for this test, as Namespace does.
func (s *Stack) namespaceNamed(t testing.TB, name string) {
	t.Helper()
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := s.Client.Create(ctx, ns); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := client.IgnoreNotFound(s.Client.Delete(ctx, ns)); err != nil {
			t.Errorf("deleting namespace %s: %v", name, err)
		}
	})
	if err := waitFor(ctx, nil, "ServiceAccount "+name+"/default", func(ctx context.Context) (bool, error) {
		err := s.Client.Get(ctx, client.ObjectKey{Namespace: name, Name: "default"}, &corev1.ServiceAccount{})
		return err == nil, err
	}); err != nil {
		t.Fatal(err)
	}
}
