package realstack

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/test/internal/podrunner"
)

// Served pods are the ones whose containers really run: kube-scheduler binds them to kwok Nodes
// as any pod, but kwok leaves them alone (every pod stage's selector says so, servedSelector) and
// a pod runner (test/internal/podrunner, started by the suite with ServePods) plays their kubelet.
// A pod is served when "<namespace>/<name>" starts with ServedPrefix (a namespace
// ServedNamespace made) or with one of Options.ServedPods, unless it is an Argo agent pod, which
// argoharness runs itself while kwok keeps it Running.
const ServedPrefix = "served-"

// argoComponent is the label the workflow-controller gives its pods; "agent" marks the agent's.
const argoComponent = "workflows.argoproj.io/component"

func (s *Stack) servedPrefixes() []string {
	return append([]string{ServedPrefix}, s.opts.ServedPods...)
}

// Serves tells whether pod is served: kwok leaves it to the pod runner. The same test as
// servedSelector, in Go.
func (s *Stack) Serves(pod *corev1.Pod) bool {
	if pod.Labels[argoComponent] == "agent" {
		return false
	}
	key := pod.Namespace + "/" + pod.Name
	for _, p := range s.servedPrefixes() {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// servedSelector is the matchExpression added to every kwok pod stage but pod-delete: it has a
// value (so DoesNotExist fails) for a served pod. pod-delete stays: kwok removing a pod being
// deleted once it has no finalizers is the kubelet's last step, after the runner stopped the
// containers (it does on the deletionTimestamp).
func (s *Stack) servedSelector() string {
	quoted := make([]string, 0, len(s.servedPrefixes()))
	for _, p := range s.servedPrefixes() {
		quoted = append(quoted, fmt.Sprintf("%q", p))
	}
	return fmt.Sprintf("    - key: '(.metadata.namespace + \"/\" + .metadata.name) as $p | select(.metadata.labels[%q] != \"agent\") | "+
		"select([%s] | any(. as $x | $p | startswith($x))) | \"served\"'\n"+
		"      operator: 'DoesNotExist'\n", argoComponent, strings.Join(quoted, ", "))
}

// leaveServedPodsAlone adds servedSelector to a kwok pod stage.
func (s *Stack) leaveServedPodsAlone(stage string) (string, error) {
	const anchor = "    matchExpressions:\n"
	if !strings.Contains(stage, anchor) {
		return "", fmt.Errorf("a kwok pod stage has no %q to extend:\n%s", strings.TrimSpace(anchor), stage)
	}
	return strings.Replace(stage, anchor, anchor+s.servedSelector(), 1), nil
}

// ServedNamespace is Namespace for served pods: every pod made in it runs through the suite's pod
// runner (ServePods), not kwok.
func (s *Stack) ServedNamespace(t testing.TB) string {
	t.Helper()
	return s.namespace(t, ServedPrefix+namespacePrefix(t.Name()))
}

// PodImages say what the images of served pods hold: the Trainer's runtime images and python
// images run the host's python3 (trainstep's scripts need python and bash, nothing else).
func PodImages() []podrunner.Image {
	return []podrunner.Image{
		{Prefix: "python:", Python: true},
		{Prefix: "ghcr.io/kubeflow/trainer/", Python: true},
		{Prefix: "pytorch/pytorch", Python: true},
	}
}

// PodRunnerOptions are the options of a pod runner for this stack: an admin client that
// watches, the ServiceAccounts' tokens from the TokenRequest API, PodImages, and, when the
// Trainer's status server runs, its Service name resolving to 127.0.0.1 (where it listens), so
// trainstep's report() reaches it as from a pod. Add what a suite's pods need more (Path, Images).
func (s *Stack) PodRunnerOptions() (podrunner.Options, error) {
	c, err := client.NewWithWatch(s.Config, client.Options{Scheme: s.Scheme})
	if err != nil {
		return podrunner.Options{}, err
	}
	opts := podrunner.Options{Client: c, Images: PodImages(),
		ServiceAccountConfig: func(ctx context.Context, ns, sa string) (*rest.Config, error) {
			return s.ServiceAccountConfig(ctx, ns, sa, podTokenSeconds)
		}}
	if s.opts.TrainJobStatus {
		opts.Hosts = map[string]string{StatusServerHost: "127.0.0.1"}
	}
	return opts, nil
}

// podTokenSeconds is how long a served pod's kubeconfig token lives: longer than a suite.
const podTokenSeconds = int64(2 * time.Hour / time.Second)

// ServePods runs every served pod with runner once kube-scheduler has bound it (a kubelet sees a
// pod only then), until the Watch is stopped.
func (s *Stack) ServePods(ctx context.Context, runner *podrunner.Runner) *podrunner.Watch {
	return runner.Watch(ctx, podrunner.Select{Want: func(pod *corev1.Pod) bool {
		return pod.Spec.NodeName != "" && s.Serves(pod)
	}})
}

// namespace creates a namespace named from prefix for this test alone (Namespace).
func (s *Stack) namespace(t testing.TB, prefix string) string {
	t.Helper()
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	if err := s.Client.Create(ctx, ns); err != nil {
		t.Fatalf("creating a namespace for %s: %v", t.Name(), err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := client.IgnoreNotFound(s.Client.Delete(ctx, ns)); err != nil {
			t.Errorf("deleting namespace %s: %v", ns.Name, err)
		}
	})
	if err := waitFor(ctx, nil, "ServiceAccount "+ns.Name+"/default", func(ctx context.Context) (bool, error) {
		err := s.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "default"}, &corev1.ServiceAccount{})
		return err == nil, err
	}); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// ClaimVolume is the PersistentVolume that claim namespace/claim was bound to ("" for the one
// claim of namespace), found from the volume's claimRef: the stack's volumes are retained, so
// what a served pod wrote there outlives the claim, which Argo and Tekton delete with their run.
func (s *Stack) ClaimVolume(ctx context.Context, namespace, claim string) (*corev1.PersistentVolume, error) {
	pvs := &corev1.PersistentVolumeList{}
	if err := s.Client.List(ctx, pvs); err != nil {
		return nil, fmt.Errorf("listing PersistentVolumes: %w", err)
	}
	var found []*corev1.PersistentVolume
	for i, pv := range pvs.Items {
		ref := pv.Spec.ClaimRef
		if ref != nil && ref.Namespace == namespace && (claim == "" || ref.Name == claim) {
			found = append(found, &pvs.Items[i])
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("%d PersistentVolumes were bound to claim %q of namespace %s, want 1", len(found), claim, namespace)
	}
	return found[0], nil
}

// TrainJobStatus tells whether the stack's Trainer runs its TrainJobStatus gate (Options).
func (s *Stack) TrainJobStatus() bool { return s.opts.TrainJobStatus }
