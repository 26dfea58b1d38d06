// Package realstack is the "real stack" test bed: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kwok with fake GPU Nodes, the JobSet manager and the Kubeflow Trainer manager
// with their webhooks, all real binaries built from pinned modules (hack/build-realstack.sh,
// hack/build-control-plane.sh) and started as child processes of a test binary.
//
// A TrainJob created here goes through the Trainer's webhooks and controller, becomes a JobSet
// (JobSet webhooks and controller), Jobs (Job controller) and Pods that kube-scheduler binds to
// kwok Nodes; kwok plays the kubelet through the Stages in stages/ and serves pods/log.
//
// Missing binaries are an error, never a skip. Only test code under test/ imports this package.
package realstack

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/harnessutil"
)

// Waits on the stack poll with these bounds. StartTimeout bounds the whole start: about 30 s on an
// idle 2-core machine, much more while other builds run.
const (
	StartTimeout = 5 * time.Minute
	Interval     = 100 * time.Millisecond
)

//go:embed stages/*.yaml
var repoStages embed.FS

// NodeLog is what every pod on a kwok Node prints: kwok serves it through pods/log.
var NodeLog = []string{
	"realstack: node starting",
	"realstack: epoch 1 loss 0.5",
	"realstack: node done",
}

// Node names and capacity of the fake Nodes.
const (
	NodeCount   = 3
	NodeGPUs    = 8
	GPUResource = "nvidia.com/gpu"
	// AscendNode is one more kwok Node, with no GPUs but AscendChips of AscendResource: an
	// extended resource whose name has capitals.
	AscendNode     = "kwok-ascend-0"
	AscendResource = "huawei.com/Ascend910"
	AscendChips    = 8
	// PVCount hostPath PersistentVolumes are made at start, for the PVCs JobSet makes from a
	// runtime's volumeClaimPolicies (torchtune's initializer volume): one per TrainJob.
	PVCount = 40
	// MissingSecret is a Secret no test creates. kwok cannot look Secrets up, so
	// stages/pod-missing-secret.yaml plays the kubelet for a pod whose volume MissingSecretVolume
	// is this Secret: the pod waits in ContainerCreating and gets the kubelet's FailedMount Event.
	MissingSecret       = "realstack-missing-secret"
	MissingSecretVolume = "credentials"
)

// Stack is a running real stack. Its fields are read-only after Start.
type Stack struct {
	// Config authenticates as an admin (group system:masters).
	Config *rest.Config
	// Client is an admin client whose scheme knows the client-go and Trainer v1alpha1 types.
	Client client.Client
	Scheme *runtime.Scheme
	// Kubeconfig is the path of an admin kubeconfig file, for subprocesses such as the CLI.
	Kubeconfig string
	// LogDir holds one log file per process (etcd.log, kube-apiserver.log, trainer.log, ...).
	LogDir string
	// Nodes are the names of the kwok Nodes.
	Nodes []string
	// Runtimes are the ClusterTrainingRuntimes installed from the Trainer module's manifests.
	Runtimes []string
	// Assets is the directory of the Trainer, JobSet and kwok binaries and manifests.
	Assets string
	// KeepLogs makes Stop leave LogDir in place; a failed Start or suite sets it.
	KeepLogs bool

	dir         string
	pvDir       string // the hostPath PersistentVolumes' directories
	procs       []*process
	pki         *pki
	managers    managerPorts // the JobSet and Trainer managers' ports, kept across an upgrade
	webhookCert keyPair
	opts        Options
	nodeLogFile string
	// privateNodes counts the Nodes PrivateNode made, to name the next.
	privateNodes atomic.Int64
	stopOnce     sync.Once
	stopErr      error
}

// AssetDirs returns where the binaries are: KUBEBUILDER_ASSETS (kube-apiserver, etcd,
// kube-controller-manager, kube-scheduler) and REALSTACK_ASSETS (the rest), each defaulting to
// the directory the Makefile builds into.
func AssetDirs() (k8s, stack string) {
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	k8s = os.Getenv("KUBEBUILDER_ASSETS")
	if k8s == "" {
		k8s = filepath.Join(cache, "trainstep", "k8s", "v1.36.3")
	}
	stack = os.Getenv("REALSTACK_ASSETS")
	if stack == "" {
		stack = filepath.Join(cache, "trainstep", "realstack", DefaultAssetsName)
	}
	return k8s, stack
}

// DefaultAssetsName is the cache directory name of the pinned versions; hack/make/realstack.mk
// builds into the same one.
const DefaultAssetsName = "trainer-v2.3.0-jobset-v0.12.0-kwok-v0.8.0"

// Start brings the whole stack up and returns once a TrainJob can run end to end: webhooks
// answer, runtimes are installed and the Nodes are Ready. On error everything started is
// stopped and the error carries the tail of the log of the process that failed.
func Start(ctx context.Context) (*Stack, error) { return StartWith(ctx, Options{}) }

// StartWith is Start with opts (statusserver.go).
func StartWith(ctx context.Context, opts Options) (_ *Stack, err error) {
	k8sDir, assets := AssetDirs()
	for _, b := range []string{
		filepath.Join(k8sDir, "etcd"), filepath.Join(k8sDir, "kube-apiserver"),
		filepath.Join(k8sDir, "kube-controller-manager"), filepath.Join(k8sDir, "kube-scheduler"),
		filepath.Join(assets, "kwok"), filepath.Join(assets, "jobset-manager"),
		filepath.Join(assets, "trainer-controller-manager"), filepath.Join(assets, "manifests", ".done-2"),
	} {
		if _, err := os.Stat(b); err != nil {
			return nil, fmt.Errorf("real stack asset missing: %w; run `make test-assets` to build it", err)
		}
	}
	dir, err := os.MkdirTemp("", "trainstep-realstack-")
	if err != nil {
		return nil, err
	}
	s := &Stack{dir: dir, LogDir: filepath.Join(dir, "logs"), Assets: assets}
	defer func() {
		if err != nil {
			// A process that died is often the cause even when another one was being waited on.
			for _, p := range s.procs {
				if exitErr := p.exitErr(); exitErr != nil && !strings.Contains(err.Error(), p.logPath) {
					err = fmt.Errorf("%w\n%w\n%s", err, exitErr, p.tail())
				}
			}
			s.KeepLogs = true // the error points at them
			if stopErr := s.Stop(); stopErr != nil {
				err = fmt.Errorf("%w (and stopping: %w)", err, stopErr)
			}
			err = fmt.Errorf("%w\n(all logs in %s)", err, s.LogDir)
		}
	}()
	if err := os.MkdirAll(s.LogDir, 0o755); err != nil {
		return nil, err
	}
	if s.pki, err = newPKI(filepath.Join(dir, "pki")); err != nil {
		return nil, fmt.Errorf("making certificates: %w", err)
	}
	ports, err := harnessutil.FreePorts(9)
	if err != nil {
		return nil, err
	}
	etcdPort, etcdPeer, apiPort, kubeletPort := ports[0], ports[1], ports[2], ports[3]
	s.managers = managerPorts{jobsetWebhook: ports[4], jobsetHealth: ports[5], trainerWebhook: ports[6], trainerHealth: ports[7], trainerStatus: ports[8]}
	s.opts = opts

	if err := s.startEtcd(ctx, etcdPort, etcdPeer); err != nil {
		return nil, err
	}
	if err := s.startAPIServer(ctx, k8sDir, etcdPort, apiPort, opts.issuer(apiPort)); err != nil {
		return nil, err
	}
	if err := s.startControllers(ctx, k8sDir); err != nil {
		return nil, err
	}
	if err := s.startKwok(ctx, kubeletPort); err != nil {
		return nil, err
	}
	if err := s.InstallCRDs(ctx, s.stackCRDs()...); err != nil {
		return nil, err
	}
	if s.webhookCert, err = s.pki.issue("webhook", "127.0.0.1", nil, true); err != nil {
		return nil, err
	}
	if err := s.startManagers(ctx, "jobset", "trainer"); err != nil {
		return nil, err
	}
	if err := s.installRuntimes(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Stop stops every process, newest first, and removes the stack's directory unless KeepLogs or
// KEEP_REALSTACK is set (then it says where the logs are).
func (s *Stack) Stop() error {
	s.stopOnce.Do(func() {
		var errs []error
		for i := len(s.procs) - 1; i >= 0; i-- {
			if err := s.procs[i].stop(); err != nil {
				errs = append(errs, err)
			}
		}
		s.stopErr = errors.Join(errs...)
		if s.pvDir != "" {
			_ = os.RemoveAll(s.pvDir)
		}
		if s.KeepLogs || os.Getenv("KEEP_REALSTACK") != "" {
			fmt.Fprintf(os.Stderr, "realstack: logs kept in %s\n", s.LogDir)
			return
		}
		_ = os.RemoveAll(s.dir)
	})
	return s.stopErr
}

func (s *Stack) start(name, binary string, env []string, args ...string) (*process, error) {
	p, err := startProcess(name, binary, s.LogDir, env, args...)
	if err != nil {
		return nil, err
	}
	s.procs = append(s.procs, p)
	return p, nil
}

// waitFor polls cond until it is true, p exits, or timeout; errors carry p's log tail.
func waitFor(ctx context.Context, p *process, what string, cond func(ctx context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, Interval, true, func(ctx context.Context) (bool, error) {
		if p != nil {
			if err := p.exitErr(); err != nil {
				return false, err
			}
		}
		ok, err := cond(ctx)
		last = err
		return ok && err == nil, nil // an error is the condition's "not yet, and why": wait on
	})
	if err == nil {
		return nil
	}
	if last != nil {
		err = fmt.Errorf("%w (last error: %w)", err, last)
	}
	tail := ""
	if p != nil {
		tail = "\n" + p.tail()
	}
	return fmt.Errorf("waiting for %s: %w%s", what, err, tail)
}

func (s *Stack) startEtcd(ctx context.Context, port, peer int) error {
	k8sDir, _ := AssetDirs()
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", port)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	p, err := s.start("etcd", filepath.Join(k8sDir, "etcd"), nil,
		"--name=realstack",
		"--data-dir="+filepath.Join(s.dir, "etcd"),
		"--listen-client-urls="+clientURL, "--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=realstack="+peerURL,
		"--unsafe-no-fsync", // a test cluster: durability is not wanted, speed is
	)
	if err != nil {
		return err
	}
	return waitFor(ctx, p, "etcd", func(ctx context.Context) (bool, error) {
		return httpOK(ctx, http.DefaultClient, clientURL+"/health")
	})
}

func httpOK(ctx context.Context, c *http.Client, url string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return false, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return true, nil
}

func (s *Stack) startAPIServer(ctx context.Context, k8sDir string, etcdPort, port int, issuer string) error {
	serving, err := s.pki.issue("apiserver", "kube-apiserver", nil, true)
	if err != nil {
		return err
	}
	admin, err := s.pki.issue("admin", "realstack-admin", []string{"system:masters"}, false)
	if err != nil {
		return err
	}
	kubelet, err := s.pki.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, false)
	if err != nil {
		return err
	}
	sa, err := s.pki.serviceAccountKey()
	if err != nil {
		return err
	}
	binary, args := filepath.Join(k8sDir, "kube-apiserver"), []string{
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", etcdPort),
		fmt.Sprintf("--secure-port=%d", port),
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--cert-dir=" + filepath.Join(s.dir, "apiserver-certs"),
		"--tls-cert-file=" + serving.cert, "--tls-private-key-file=" + serving.key,
		"--client-ca-file=" + s.pki.caFile(),
		"--kubelet-client-certificate=" + kubelet.cert, "--kubelet-client-key=" + kubelet.key,
		"--kubelet-preferred-address-types=InternalIP",
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=" + issuer,
		"--service-account-key-file=" + sa.cert, "--service-account-signing-key-file=" + sa.key,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		// 1.37 refuses a loopback advertise address to the endpoint reconciler, which keeps the
		// default/kubernetes Endpoints: nothing here reaches the apiserver through that Service.
		"--endpoint-reconciler-type=none",
	}
	// A Trainer v2.0 webhook is called by its Service DNS name (release.go).
	if flags, err := trainerTakesFlags(s.Assets); err != nil {
		return err
	} else if flags {
		hosts, err := s.apiServerHosts()
		if err != nil {
			return err
		}
		if binary, args, err = inMountNamespace("kube-apiserver calling a Trainer v2.0 webhook", [][2]string{{hosts, "/etc/hosts"}}, binary, args); err != nil {
			return err
		}
	}
	p, err := s.start("kube-apiserver", binary, nil, args...)
	if err != nil {
		return err
	}
	s.Config = &rest.Config{
		Host: fmt.Sprintf("https://127.0.0.1:%d", port),
		TLSClientConfig: rest.TLSClientConfig{
			CAFile: s.pki.caFile(), CertFile: admin.cert, KeyFile: admin.key,
		},
		QPS: 100, Burst: 200,
	}
	s.Kubeconfig = filepath.Join(s.dir, "kubeconfig")
	if err := writeKubeconfig(s.Kubeconfig, s.Config); err != nil {
		return err
	}
	if s.Scheme, err = trainjob.NewScheme(apiextensionsv1.AddToScheme); err != nil {
		return err
	}
	hc, err := rest.HTTPClientFor(s.Config)
	if err != nil {
		return err
	}
	if err := waitFor(ctx, p, "kube-apiserver /readyz", func(ctx context.Context) (bool, error) {
		return httpOK(ctx, hc, s.Config.Host+"/readyz")
	}); err != nil {
		return err
	}
	s.Client, err = client.New(s.Config, client.Options{Scheme: s.Scheme})
	return err
}

func writeKubeconfig(path string, cfg *rest.Config) error {
	conf := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: realstack
  cluster: {server: %q, certificate-authority: %q}
users:
- name: admin
  user: {client-certificate: %q, client-key: %q}
contexts:
- name: realstack
  context: {cluster: realstack, user: admin, namespace: default}
current-context: realstack
`, cfg.Host, cfg.CAFile, cfg.CertFile, cfg.KeyFile)
	if _, err := clientcmd.Load([]byte(conf)); err != nil {
		return fmt.Errorf("writing the kubeconfig: %w", err)
	}
	return os.WriteFile(path, []byte(conf), 0o600)
}

// kcmControllers: PVC binding (to the PVs made at start), Jobs, StatefulSets (Tekton's affinity
// assistant), cascade deletion, namespace deletion, default ServiceAccounts and their tokens, and
// ResourceQuota usage (without it the apiserver's ResourceQuota admission refuses every pod of a
// namespace with a quota: "status unknown for quota"). The node-lifecycle controller is left out
// (kwok's Nodes have no real leases to judge); Start removes the not-ready taint itself. The
// apiserver's default admission plugins include ResourceQuota, LimitRanger and PodSecurity.
const kcmControllers = "persistentvolume-binder-controller,job-controller,statefulset-controller,garbage-collector-controller,namespace-controller,serviceaccount-controller,serviceaccount-token-controller,resourcequota-controller"

func (s *Stack) startControllers(ctx context.Context, k8sDir string) error {
	kcm, err := s.start("kube-controller-manager", filepath.Join(k8sDir, "kube-controller-manager"), nil,
		"--kubeconfig="+s.Kubeconfig,
		"--leader-elect=false", "--secure-port=0",
		"--controllers="+kcmControllers,
		"--service-account-private-key-file="+filepath.Join(s.pki.dir, "sa.key"),
		"--root-ca-file="+s.pki.caFile(),
		"--use-service-account-credentials=false",
	)
	if err != nil {
		return err
	}
	if _, err := s.start("kube-scheduler", filepath.Join(k8sDir, "kube-scheduler"), nil,
		"--kubeconfig="+s.Kubeconfig, "--leader-elect=false", "--secure-port=0",
	); err != nil {
		return err
	}
	// Not under the stack's directory in /tmp: a served pod's containers get a /tmp of their own
	// (test/internal/podrunner), which would hide the volume's directory.
	pvDir, err := os.MkdirTemp("/var/tmp", "trainstep-realstack-pv-")
	if err != nil {
		return fmt.Errorf("creating the PersistentVolumes' directory: %w", err)
	}
	s.pvDir = pvDir
	for i := range PVCount {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("realstack-pv-%d", i)},
			Spec: corev1.PersistentVolumeSpec{
				Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Gi")},
				// ReadWriteOnce only, what kind's local-path and most default StorageClasses
				// offer: the examples must run with nothing more.
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource: corev1.PersistentVolumeSource{
					HostPath: &corev1.HostPathVolumeSource{Path: filepath.Join(s.pvDir, strconv.Itoa(i))},
				},
			},
		}
		if err := s.Client.Create(ctx, pv); err != nil {
			return fmt.Errorf("creating PersistentVolume %s: %w", pv.Name, err)
		}
	}
	return waitFor(ctx, kcm, "kube-controller-manager to create ServiceAccount default/default", func(ctx context.Context) (bool, error) {
		err := s.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default"}, &corev1.ServiceAccount{})
		return err == nil, err
	})
}

func (s *Stack) startKwok(ctx context.Context, port int) error {
	serving, err := s.pki.issue("kwok-kubelet", "kwok", nil, true)
	if err != nil {
		return err
	}
	s.nodeLogFile = filepath.Join(s.dir, "node.log")
	logFile := s.nodeLogFile
	if err := s.writeNodeLog(NodeLog); err != nil {
		return err
	}
	var docs []string
	moduleStages, err := filepath.Glob(filepath.Join(s.Assets, "manifests", "kwok", "stages", "*.yaml"))
	if err != nil {
		return err
	}
	for _, f := range moduleStages {
		if strings.HasSuffix(f, "/pod-complete.yaml") {
			continue // replaced by stages/pod-complete.yaml, which leaves failing pods alone
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if strings.HasSuffix(f, "/pod-ready.yaml") {
			data, err = leaveStuckPodsAlone(data)
			if err != nil {
				return err
			}
		}
		doc := string(data)
		if strings.Contains(doc, "kind: Pod\n") && !strings.HasSuffix(f, "/pod-delete.yaml") {
			if doc, err = s.leaveServedPodsAlone(doc); err != nil {
				return err
			}
		}
		docs = append(docs, doc)
	}
	ours, err := fs.Glob(repoStages, "stages/*.yaml")
	if err != nil {
		return err
	}
	for _, f := range ours {
		data, err := repoStages.ReadFile(f)
		if err != nil {
			return err
		}
		doc, err := s.leaveServedPodsAlone(string(data))
		if err != nil {
			return err
		}
		docs = append(docs, doc)
	}
	docs = append(docs, fmt.Sprintf(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: realstack-node-log
spec:
  logs:
  - logsFile: %q
    follow: false
`, logFile))
	config := filepath.Join(s.dir, "kwok.yaml")
	if err := os.WriteFile(config, []byte(strings.Join(docs, "\n---\n")), 0o644); err != nil {
		return err
	}
	for i := range NodeCount + 1 {
		name, extra := fmt.Sprintf("kwok-node-%d", i), corev1.ResourceName(GPUResource)
		chips := NodeGPUs
		if i == NodeCount {
			name, extra, chips = AscendNode, AscendResource, AscendChips
		}
		if err := s.createNode(ctx, name, nil, nil, extra, chips); err != nil {
			return err
		}
		s.Nodes = append(s.Nodes, name)
	}
	// kwok starts after the Nodes have their capacity: its node-initialize stage fills in a
	// default capacity for a Node that has none.
	p, err := s.start("kwok", filepath.Join(s.Assets, "kwok"), nil,
		"--kubeconfig="+s.Kubeconfig,
		"--config="+config,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--node-ip=127.0.0.1", "--node-port="+strconv.Itoa(port),
		fmt.Sprintf("--server-address=127.0.0.1:%d", port),
		"--tls-cert-file="+serving.cert, "--tls-private-key-file="+serving.key,
	)
	if err != nil {
		return err
	}
	return waitFor(ctx, p, "kwok to make the Nodes Ready", func(ctx context.Context) (bool, error) {
		for _, name := range s.Nodes {
			if ok, err := s.nodeSettled(ctx, name); !ok {
				return false, err
			}
		}
		return true, nil
	})
}

// createNode creates a Node kwok manages, with labels besides its own and taints, and gives it
// the capacity of the stack's Nodes with chips of the extended resource extra. kwok fills in a
// default capacity for a Node that has none, so this comes before kwok sees it Ready.
func (s *Stack) createNode(ctx context.Context, name string, labels map[string]string, taints []corev1.Taint, extra corev1.ResourceName, chips int) error {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels:      map[string]string{"type": "kwok", "kubernetes.io/hostname": name},
		},
		Spec: corev1.NodeSpec{Taints: taints},
	}
	maps.Copy(n.Labels, labels)
	if err := s.Client.Create(ctx, n); err != nil {
		return fmt.Errorf("creating Node %s: %w", n.Name, err)
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
		extra:                 resource.MustParse(strconv.Itoa(chips)),
	}
	// A patch, not an update: kwok may already be writing the Node's status.
	orig := n.DeepCopy()
	n.Status.Capacity, n.Status.Allocatable = capacity, capacity
	if err := s.Client.Status().Patch(ctx, n, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("setting the capacity of Node %s: %w", n.Name, err)
	}
	return nil
}

// nodeSettled reports whether Node name is Ready and has only the taints it was made with,
// taking off those a new Node gets: the TaintNodesByCondition admission plugin adds not-ready at
// creation, and only the node-lifecycle controller, not running here, would take it off.
func (s *Stack) nodeSettled(ctx context.Context, name string) (bool, error) {
	n := &corev1.Node{}
	if err := s.Client.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
		return false, err
	}
	if !nodeReady(n) {
		return false, fmt.Errorf("node %s is not Ready", name)
	}
	made := slices.DeleteFunc(slices.Clone(n.Spec.Taints), func(t corev1.Taint) bool {
		return strings.HasPrefix(t.Key, "node.kubernetes.io/")
	})
	if len(made) < len(n.Spec.Taints) {
		n.Spec.Taints = made
		return false, s.Client.Update(ctx, n)
	}
	return true, nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// tlsOK is true once a TLS server signed by the stack's CA answers on port.
func (s *Stack) tlsOK(port int) func(context.Context) (bool, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.pki.caPEM)
	return func(ctx context.Context) (bool, error) {
		d := tls.Dialer{Config: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}}
		c, err := d.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return false, err
		}
		c.Close()
		return true, nil
	}
}

// writeNodeLog makes lines the log of every pod. CRI log format: kwok refuses anything else
// with "unsupported log format".
func (s *Stack) writeNodeLog(lines []string) error {
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "2026-12-01T05:20:00.000000000Z stdout F %s\n", l)
	}
	// Write and rename, so that kwok never serves a half-written file.
	tmp := s.nodeLogFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, s.nodeLogFile)
}

// SetNodeLog makes lines the log every pod prints (kwok reads the file at each pods/log
// request) until the test ends, when NodeLog is back. The file is shared by all pods: tests
// that call it must not run in parallel.
func (s *Stack) SetNodeLog(t testing.TB, lines ...string) {
	t.Helper()
	if err := s.writeNodeLog(lines); err != nil {
		t.Fatalf("writing the node log: %v", err)
	}
	t.Cleanup(func() {
		if err := s.writeNodeLog(NodeLog); err != nil {
			t.Errorf("restoring the node log: %v", err)
		}
	})
}

// leaveStuckPodsAlone adds to kwok's pod-ready stage selectors that skip pods asking for
// stages/pod-image-pull-backoff.yaml or mounting the missing Secret of
// stages/pod-missing-secret.yaml, so those stages alone decide their fate.
func leaveStuckPodsAlone(stage []byte) ([]byte, error) {
	const anchor = "    matchExpressions:\n"
	s := string(stage)
	if !strings.Contains(s, anchor) {
		return nil, fmt.Errorf("kwok's pod-ready stage has no %q to extend", strings.TrimSpace(anchor))
	}
	return []byte(strings.Replace(s, anchor, anchor+
		"    - key: '(.spec.containers[].env // [])[] | select(.name == \"KWOK_IMAGE_PULL_BACKOFF\") | .value'\n"+
		"      operator: 'DoesNotExist'\n"+
		fmt.Sprintf("    - key: '(.spec.volumes // [])[] | select(.secret.secretName == %q) | .name'\n", MissingSecret)+
		"      operator: 'DoesNotExist'\n"+holdReadySelector, 1)), nil
}
