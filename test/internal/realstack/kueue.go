package realstack

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/harnessutil"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// The Kueue option of the real stack: the real Kueue manager (sigs.k8s.io/kueue, built by
// hack/build-kueue.sh) with its CRDs, its conversion, mutating and validating webhooks (on
// 127.0.0.1 with the stack's CA, as JobSet's and the Trainer's) and the TrainJob integration
// (trainer.kubeflow.org/trainjob) alone. A suite turns it on with StartKueue as its SetUp; each
// test then makes its own ClusterQueue and LocalQueue with KueueQueue, so parallel tests never
// share quota.

// DefaultKueueVersion is the Kueue hack/make/kueue.mk builds; the cache directory is named after it.
const DefaultKueueVersion = testenv.KueueVersion

// Kueue objects every queue uses.
const (
	KueueNamespace = "kueue-system"
	KueueFlavor    = "realstack-flavor"
	// KueueLowPriority and KueueHighPriority are WorkloadPriorityClasses (values 100 and 1000):
	// a TrainJob labelled kueue.x-k8s.io/priority-class=KueueHighPriority preempts a low one in
	// its ClusterQueue.
	KueueLowPriority  = "realstack-low"
	KueueHighPriority = "realstack-high"
	// KueuePriorityLabel names a TrainJob's WorkloadPriorityClass.
	KueuePriorityLabel = "kueue.x-k8s.io/priority-class"
	// KueuePodsReadyTimeout is Kueue's waitForPodsReady timeout: an admitted workload whose pods
	// are not all Ready by then is evicted (reason PodsReadyTimeout) and requeued at once. At 20 s
	// a fresh-clone make test (four suites' stacks at once on 2 cores) saw pods that were not held
	// miss it, and steps meant to succeed were evicted twice and deactivated.
	KueuePodsReadyTimeout = 40 * time.Second
	// KueueRequeuingLimit is waitForPodsReady's requeuingStrategy.backoffLimitCount: a Workload
	// requeued once whose pods again miss KueuePodsReadyTimeout is deactivated by Kueue
	// (DeactivatedDueToRequeuingLimitExceeded), and stays suspended until someone activates it.
	KueueRequeuingLimit = 1
)

// KueueAssets is the directory of the Kueue manager and its manifests: KUEUE_ASSETS, else where
// hack/make/kueue.mk builds them.
func KueueAssets() string {
	if d := os.Getenv("KUEUE_ASSETS"); d != "" {
		return d
	}
	_, stack := AssetDirs() // <cache>/trainstep/realstack/<versions>
	return filepath.Join(filepath.Dir(filepath.Dir(stack)), "kueue", DefaultKueueVersion)
}

// StartKueue is a SetUp that adds Kueue to the stack. Its process is one of the stack's: Stop
// stops it.
func StartKueue(ctx context.Context, s *Stack) (func(), error) {
	return func() {}, s.startKueue(ctx, true)
}

// startKueue starts Kueue, with waitForPodsReady or without (a MultiKueue manager: its jobs have
// no pods there).
func (s *Stack) startKueue(ctx context.Context, waitForPodsReady bool) error {
	assets := KueueAssets()
	for _, f := range []string{filepath.Join(assets, "kueue-manager"), filepath.Join(assets, "manifests", ".done")} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("kueue asset missing: %w; run `make test-assets` to build it", err)
		}
	}
	ports, err := harnessutil.FreePorts(2)
	if err != nil {
		return err
	}
	webhookPort, healthPort := ports[0], ports[1]
	m := filepath.Join(assets, "manifests")
	if err := s.installKueueCRDs(ctx, filepath.Join(m, "crds", "*.yaml"), webhookPort); err != nil {
		return err
	}
	if err := s.installWebhooksMatching(ctx, filepath.Join(m, "webhooks.yaml"), webhookPort, "kueue-", kueueWebhook); err != nil {
		return err
	}
	if err := client.IgnoreAlreadyExists(s.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: KueueNamespace}})); err != nil {
		return fmt.Errorf("creating namespace %s: %w", KueueNamespace, err)
	}
	kp, err := s.pki.issue("kueue-webhook", "127.0.0.1", nil, true)
	if err != nil {
		return err
	}
	tmp, err := s.certTmpdir("kueue", kp)
	if err != nil {
		return err
	}
	// Kueue's Configuration names its webhook cert directory (its default is /tmp's).
	certDir := filepath.Join(tmp, "k8s-webhook-server", "serving-certs")
	cfg := filepath.Join(s.dir, "kueue-config.yaml")
	set := map[string]any{
		"namespace":                     KueueNamespace,
		"leaderElection.leaderElect":    false,
		"internalCertManagement.enable": false,
		"webhook.port":                  int64(webhookPort),
		"webhook.host":                  "127.0.0.1",
		"webhook.certDir":               certDir,
		"metrics.bindAddress":           "0",
		"health.healthProbeBindAddress": fmt.Sprintf("127.0.0.1:%d", healthPort),
		// Only TrainJobs: Kueue leaves the JobSets, Jobs and pods the Trainer makes for them alone.
		"integrations.frameworks": []any{"trainer.kubeflow.org/trainjob"},
	}
	if waitForPodsReady {
		// Pods not Ready in time are evicted and requeued after 5 s (Kueue's back-off is minutes by
		// default), so a test sees the eviction, and the re-admission within its deadline. A
		// second timeout deactivates the Workload (KueueRequeuingLimit).
		maps.Copy(set, map[string]any{
			"waitForPodsReady.requeuingStrategy.backoffLimitCount":  int64(KueueRequeuingLimit),
			"waitForPodsReady.timeout":                              KueuePodsReadyTimeout.String(),
			"waitForPodsReady.blockAdmission":                       false,
			"waitForPodsReady.requeuingStrategy.timestamp":          "Eviction",
			"waitForPodsReady.requeuingStrategy.backoffBaseSeconds": int64(5),
			"waitForPodsReady.requeuingStrategy.backoffMaxSeconds":  int64(5),
		})
	}
	if err := managerConfig(filepath.Join(m, "controller_manager_config.yaml"), cfg, set); err != nil {
		return err
	}
	p, err := s.start("kueue", filepath.Join(assets, "kueue-manager"),
		// The metrics server is off, but Kueue reads its certificate anyway (hack/build-kueue.sh).
		[]string{"KUEUE_METRICS_CERT_DIR=" + certDir, "KUBECONFIG=" + s.Kubeconfig},
		"--config="+cfg,
		// The on-demand visibility API is an aggregated apiserver of its own: not used here.
		"--feature-gates=VisibilityOnDemand=false",
	)
	if err != nil {
		return err
	}
	if err := s.waitManager(ctx, p, healthPort, webhookPort); err != nil {
		return err
	}
	if err := s.kueueCommon(ctx, p); err != nil {
		return err
	}
	return nil
}

// kueueWebhook keeps the webhooks of Kueue's own objects and of TrainJobs: the other
// integrations' (pods, Jobs, JobSets, Deployments, ...) are off, and their webhooks would only
// add a call to every pod and Job the stack makes.
func kueueWebhook(path string) bool {
	return strings.Contains(path, "-kueue-x-k8s-io-") || strings.Contains(path, "-trainer-kubeflow-org-")
}

// installKueueCRDs installs Kueue's CRDs with the conversion webhook the module's kustomization
// patches in (config/components/crd/patches/webhook_in_*.yaml) for the kinds served in two
// versions, pointed at Kueue's webhook server on 127.0.0.1.
func (s *Stack) installKueueCRDs(ctx context.Context, pattern string, webhookPort int) error {
	objs, err := readObjects(pattern)
	if err != nil {
		return err
	}
	converted := map[string]bool{
		"localqueues.kueue.x-k8s.io": true, "clusterqueues.kueue.x-k8s.io": true, "cohorts.kueue.x-k8s.io": true,
		"workloads.kueue.x-k8s.io": true, "multikueueclusters.kueue.x-k8s.io": true,
	}
	ca := base64.StdEncoding.EncodeToString(s.pki.caPEM)
	for _, o := range objs {
		if !converted[o.GetName()] {
			continue
		}
		if err := unstructured.SetNestedMap(o.Object, map[string]any{
			"strategy": "Webhook",
			"webhook": map[string]any{
				"clientConfig": map[string]any{
					"url":      fmt.Sprintf("https://127.0.0.1:%d/convert", webhookPort),
					"caBundle": ca,
				},
				"conversionReviewVersions": []any{"v1"},
			},
		}, "spec", "conversion"); err != nil {
			return err
		}
	}
	for _, o := range objs {
		if err := client.IgnoreAlreadyExists(s.Client.Create(ctx, o)); err != nil {
			return fmt.Errorf("creating CRD %s: %w", o.GetName(), err)
		}
	}
	return s.InstallCRDs(ctx, pattern) // already created: waits until they are Established
}

// installWebhooksMatching is installWebhooks for the webhooks whose path keep accepts, with
// the configurations named prefix+name.
func (s *Stack) installWebhooksMatching(ctx context.Context, file string, port int, prefix string, keep func(path string) bool) error {
	objs, err := readObjects(file)
	if err != nil {
		return err
	}
	dir := filepath.Join(s.dir, "webhooks-"+strings.TrimSuffix(prefix, "-"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var docs []string
	for _, o := range objs {
		whs, _, err := unstructured.NestedSlice(o.Object, "webhooks")
		if err != nil {
			return err
		}
		var kept []any
		for _, w := range whs {
			path, _, _ := unstructured.NestedString(w.(map[string]any), "clientConfig", "service", "path")
			if keep(path) {
				kept = append(kept, w)
			}
		}
		if len(kept) == 0 {
			continue
		}
		if err := unstructured.SetNestedSlice(o.Object, kept, "webhooks"); err != nil {
			return err
		}
		data, err := o.MarshalJSON()
		if err != nil {
			return err
		}
		docs = append(docs, string(data))
	}
	filtered := filepath.Join(dir, "webhooks.yaml")
	if err := os.WriteFile(filtered, []byte(strings.Join(docs, "\n---\n")), 0o644); err != nil {
		return err
	}
	return s.installWebhooks(ctx, filtered, fmt.Sprintf("https://127.0.0.1:%d", port), s.pki.caPEM, func(n string) string { return prefix + n })
}

// kueueCommon makes the ResourceFlavor and the WorkloadPriorityClasses every queue uses, through
// Kueue's webhooks (retried while they come up).
func (s *Stack) kueueCommon(ctx context.Context, p *process) error {
	objs := []*unstructured.Unstructured{
		kueueObject("ResourceFlavor", "", KueueFlavor, map[string]any{"spec": map[string]any{}}),
		kueueObject("WorkloadPriorityClass", "", KueueLowPriority, map[string]any{"value": int64(100)}),
		kueueObject("WorkloadPriorityClass", "", KueueHighPriority, map[string]any{"value": int64(1000)}),
	}
	for _, o := range objs {
		if err := waitFor(ctx, p, "Kueue's webhook to admit "+o.GetKind()+" "+o.GetName(), func(ctx context.Context) (bool, error) {
			err := s.Client.Create(ctx, o.DeepCopy())
			return err == nil || apierrors.IsAlreadyExists(err), err
		}); err != nil {
			return err
		}
	}
	return nil
}

func kueueObject(kind, namespace, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: fields}
	u.SetAPIVersion("kueue.x-k8s.io/v1beta2")
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// KueueQueue makes, for one test, a ClusterQueue whose only quota that binds is gpus of
// GPUResource (cpu and memory are ample), preempting lower priorities within itself, and a
// LocalQueue of the same name in namespace pointing at it, deleted when the test ends. It returns
// the queue's name (unique: tests sharing a namespace get one each) once both are Active.
func (s *Stack) KueueQueue(t testing.TB, namespace string, gpus int) string {
	t.Helper()
	return s.KueueQueueNamed(t, namespace, "", gpus)
}

// KueueQueueNamed is KueueQueue with the LocalQueue named localQueue (the name a user's file
// gives, such as Kueue's quick-start "user-queue"), or after its ClusterQueue when "". It returns
// the LocalQueue's name.
func (s *Stack) KueueQueueNamed(t testing.TB, namespace, localQueue string, gpus int) string {
	t.Helper()
	ctx := t.Context()
	cq := kueueObject("ClusterQueue", "", "", map[string]any{"spec": map[string]any{
		"namespaceSelector": map[string]any{},
		"preemption":        map[string]any{"withinClusterQueue": "LowerPriority"},
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
	cq.SetGenerateName("realstack-")
	if err := s.Client.Create(ctx, cq); err != nil {
		t.Fatalf("creating a ClusterQueue: %v", err)
	}
	if localQueue == "" {
		localQueue = cq.GetName()
	}
	lq := kueueObject("LocalQueue", namespace, localQueue, map[string]any{"spec": map[string]any{"clusterQueue": cq.GetName()}})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for _, o := range []*unstructured.Unstructured{lq, cq} {
			if err := client.IgnoreNotFound(s.Client.Delete(ctx, o)); err != nil {
				t.Errorf("deleting %s %s: %v", o.GetKind(), o.GetName(), err)
			}
		}
	})
	if err := s.Client.Create(ctx, lq); err != nil {
		t.Fatalf("creating LocalQueue %s/%s: %v", namespace, lq.GetName(), err)
	}
	if err := waitFor(ctx, nil, "queue "+cq.GetName()+" to be Active", func(ctx context.Context) (bool, error) {
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
	return localQueue
}

// KueueBlocker creates a one-node TrainJob in queue that holds gpus GPUs for seconds once
// running, with WorkloadPriorityClass priority unless empty, and returns once Kueue has admitted
// it: the next job of the queue waits for quota (or, lower, was preempted for it).
func (s *Stack) KueueBlocker(t testing.TB, namespace, queue string, gpus, seconds int, priority string) *trainer.TrainJob {
	t.Helper()
	labels := map[string]string{trainjob.LabelKueueQueue: queue}
	if priority != "" {
		labels[KueuePriorityLabel] = priority
	}
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: "blocker-", Labels: labels},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed", Kind: ptr.To(trainer.ClusterTrainingRuntimeKind), APIGroup: ptr.To(trainer.GroupVersion.Group)},
			Trainer: &trainer.Trainer{
				NumNodes: ptr.To[int32](1),
				Env:      []corev1.EnvVar{{Name: "KWOK_RUN_SECONDS", Value: fmt.Sprint(seconds)}},
				ResourcesPerNode: &corev1.ResourceRequirements{
					Limits: corev1.ResourceList{GPUResource: resource.MustParse(fmt.Sprint(gpus))}},
			},
		},
	}
	if err := s.Client.Create(t.Context(), tj); err != nil {
		t.Fatalf("creating a blocking TrainJob: %v", err)
	}
	if err := waitFor(t.Context(), nil, "Kueue to admit TrainJob "+tj.Name, func(ctx context.Context) (bool, error) {
		w, err := trainjob.FindWorkload(ctx, s.Client, tj)
		return w != nil && w.Admitted, err
	}); err != nil {
		t.Fatal(err)
	}
	return tj
}

func conditionTrue(u *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			return m["status"] == string(metav1.ConditionTrue)
		}
	}
	return false
}

// HoldReadyEnv, set to "1" in a step's trainer env, keeps its pods from becoming Ready (kwok's
// pod-ready stage leaves them waiting in ContainerCreating) until ReleaseHeldPods annotates them
// with holdReleased: how a test makes Kueue's waitForPodsReady evict an admitted job, then lets
// the next admission run. Its own annotation, not ReleaseAnnotation: a pod held Running by
// KWOK_HOLD as well stays Running once Ready.
const (
	HoldReadyEnv = "KWOK_HOLD_READY"
	holdReleased = "realstack.trainstep.dev/ready"
)

// holdReadySelector is added to kwok's pod-ready stage: a value (so DoesNotExist fails) only for
// a pod held by HoldReadyEnv and not yet released.
var holdReadySelector = fmt.Sprintf("    - key: 'select(([(.spec.containers[].env // [])[] | select(.name == %q and .value == \"1\")] | length > 0) and (.metadata.annotations[%q] == null)) | \"held\"'\n"+
	"      operator: 'DoesNotExist'\n", HoldReadyEnv, holdReleased)

// ReleaseHeldPods lets the held pods of namespace made at or after since (and not being deleted)
// become Ready; it returns how many it released.
func (s *Stack) ReleaseHeldPods(t testing.TB, namespace string, since time.Time) int {
	t.Helper()
	pods := &corev1.PodList{}
	if err := s.Client.List(t.Context(), pods, client.InNamespace(namespace)); err != nil {
		t.Fatalf("listing the pods of %s: %v", namespace, err)
	}
	n := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || p.Annotations[holdReleased] != "" || p.CreationTimestamp.Time.Before(since) {
			continue
		}
		patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, holdReleased)))
		if err := s.Client.Patch(t.Context(), p, patch); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			t.Fatalf("releasing pod %s/%s: %v", namespace, p.Name, err)
		}
		n++
	}
	return n
}
