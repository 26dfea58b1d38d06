// Package argoharness runs the Argo face with Argo's own code against any test apiserver (the
// envtest bed of test/e2e/argo or the real stack of test/realstack/argo): the pinned
// workflow-controller as a local process, the plugin's manifests from manifests/argo, the real
// `executor argo-plugin` binary, and, since there is no kubelet that would run Argo's agent pod,
// that pod's `argoexec agent` containers as local processes with the pod's own env. The plugin
// and the agent authenticate as their ServiceAccounts, so manifests/argo's RBAC is exercised.
//
// argoexec hard-codes /var/run/argo (so this needs root) and the plugin listens on the port
// manifests/argo names: one harness runs at a time on a machine, which Start ensures with a
// file lock (go test runs packages in parallel).
package argoharness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/test/internal/harnessutil"
	"github.com/trainstep/trainstep/test/internal/kubeconfig"
	"github.com/trainstep/trainstep/test/internal/podrunner"
)

// Namespace is where the harness's (namespaced) controller, the workflows and the plugin live:
// manifests/argo's own, which its ClusterRoleBindings name.
const Namespace = "ml"

// PluginAddr is the plugin's address: the first containerPort of manifests/argo/plugin.yaml.
const PluginAddr = "127.0.0.1:7356"

// TokenDir is where `argoexec agent init` writes the plugin's token (hard-coded in argoexec).
const TokenDir = "/var/run/argo/trainstep-executor-plugin"

// lockFile serialises harnesses across test binaries: they share TokenDir and PluginAddr.
const lockFile = "/var/run/argo/.trainstep-argoharness.lock"

// Poll is the interval of the harness's own waits.
const Poll = 100 * time.Millisecond

// Options says which apiserver to run against and as whom.
type Options struct {
	// Kubeconfig is an admin kubeconfig file, for the workflow-controller.
	Kubeconfig string
	// Config is an admin config, for the harness's client.
	Config *rest.Config
	// Scheme is the client's scheme; the Argo types are added to it.
	Scheme *runtime.Scheme
	// ServiceAccountConfig returns a config that authenticates as ServiceAccount namespace/name
	// (Namespace's, and those of the pods Pods runs); it is called after manifests/argo is
	// applied, so the harness's ServiceAccounts exist.
	ServiceAccountConfig func(ctx context.Context, namespace, name string) (*rest.Config, error)
	// ReadyTimeout bounds the wait for the plugin's /readyz.
	ReadyTimeout time.Duration
	// Images are what the images of the pods the harness runs hold (podrunner.Image), besides
	// argoexec, which every container finds on PATH.
	Images []podrunner.Image
	// Hosts are /etc/hosts entries every pod the harness runs sees (podrunner.Options.Hosts).
	Hosts map[string]string
	// RequeueTime is the workflow-controller's DEFAULT_REQUEUE_TIME and so the agent's
	// ARGO_AGENT_PATCH_RATE: how often the agent writes plugin replies into the WorkflowTaskSet.
	// Argo's default is 10s; the harness's is 1s, so its tests wait less.
	RequeueTime time.Duration
}

// Harness is a running workflow-controller and plugin.
type Harness struct {
	// Client is an admin client that knows the Argo types.
	Client client.Client
	// Assets is ARGO_ASSETS: workflow-controller, argoexec and crds/.
	Assets string

	workdir  string
	agentCfg string // kubeconfig of the workflow ServiceAccount (the agent's identity)
	procCtx  context.Context
	cancel   context.CancelFunc

	// The plugin process, which a test may kill and start again (KillPlugin, StartPlugin).
	bin        string
	pluginArgs []string
	pluginStop context.CancelFunc
	pluginDone chan struct{}
	opts       Options
	lock       *os.File
	mu         sync.Mutex
	logs       map[string]*harnessutil.SyncBuffer
	pids       map[string]int
	done       []chan struct{}

	// Pods runs pods as local processes (podrunner.go), as their own ServiceAccounts, with
	// argoexec on PATH and the images of Options.Images.
	Pods *podrunner.Runner
}

// AssetsDir returns ARGO_ASSETS after checking that it holds what the harness runs.
func AssetsDir() (string, error) {
	assets := os.Getenv("ARGO_ASSETS")
	if assets == "" {
		return "", errors.New("ARGO_ASSETS is not set: run `make test-assets` to build Argo's workflow-controller and argoexec, " +
			"then set ARGO_ASSETS to their directory (`make test` does both)")
	}
	// Pods run as processes each get a /tmp of their own (podrunner.go), which hides whatever the
	// host has there: argoexec would not be found inside a container.
	if abs, err := filepath.Abs(assets); err == nil && (abs == "/tmp" || strings.HasPrefix(abs, "/tmp/")) {
		return "", fmt.Errorf("ARGO_ASSETS=%s is under /tmp, which every pod the Argo harness runs gets a private one of, "+
			"so its containers cannot find argoexec: build the assets elsewhere (`make test-assets` with CACHE_DIR or "+
			"XDG_CACHE_HOME outside /tmp)", assets)
	}
	for _, f := range []string{"workflow-controller", "argoexec", "crds"} {
		if _, err := os.Stat(filepath.Join(assets, f)); err != nil {
			return "", fmt.Errorf("%s is missing from ARGO_ASSETS=%s: run `make test-assets`", f, assets)
		}
	}
	return assets, nil
}

// Release is the Argo release under test: the name of ARGO_ASSETS's directory, which
// hack/build-argo.sh's cache is laid out by (…/argo/v4.0.7); "" when the directory is named
// otherwise. Tests that reproduce what an Argo client does (argo retry) follow it.
func (h *Harness) Release() string { return release(h.Assets) }

func release(assets string) string {
	if v := filepath.Base(assets); strings.HasPrefix(v, "v") {
		return v
	}
	return ""
}

// executorImage is the argoexec image the controller names in the agent pod: never pulled (the
// harness runs ARGO_ASSETS/argoexec itself), but tagged with the release under test.
func executorImage(assets string) string {
	tag := release(assets)
	if tag == "" {
		tag = "latest"
	}
	return "quay.io/argoproj/argoexec:" + tag
}

// CRDDir is the directory of Argo's CRDs in ARGO_ASSETS.
func CRDDir(assets string) string { return filepath.Join(assets, "crds") }

// lockWait bounds the wait for the suites that run Argo before this one.
const lockWait = 25 * time.Minute

// setUpAfterLock bounds what Start does once it holds the lock (the controller, the executor's
// build, the plugin's readiness): as long as a suite's whole set-up may take.
const setUpAfterLock = 10 * time.Minute

// Start takes the machine's Argo lock (waiting while another suite holds it, up to lockWait),
// applies Argo's prerequisites and manifests/argo in Namespace, starts the workflow-controller
// and the plugin binary, and returns once the plugin is ready. Argo's CRDs must be installed.
// The processes run until Stop.
func Start(ctx context.Context, opts Options) (_ *Harness, err error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = time.Minute
	}
	if err := wfv1.AddToScheme(opts.Scheme); err != nil {
		return nil, err
	}
	c, err := client.New(opts.Config, client.Options{Scheme: opts.Scheme})
	if err != nil {
		return nil, err
	}
	procCtx, cancel := context.WithCancel(context.Background())
	h := &Harness{Client: c, Assets: assets, procCtx: procCtx, cancel: cancel, logs: map[string]*harnessutil.SyncBuffer{}, pids: map[string]int{},
		opts: opts}
	defer func() {
		if err != nil {
			h.Stop()
		}
	}()
	watcher, err := client.NewWithWatch(opts.Config, client.Options{Scheme: opts.Scheme})
	if err != nil {
		return nil, err
	}
	if h.Pods, err = podrunner.New(ctx, podrunner.Options{Client: watcher, Path: []string{assets}, Images: opts.Images, Hosts: opts.Hosts,
		ServiceAccountConfig: opts.ServiceAccountConfig}); err != nil {
		return nil, err
	}
	// The wait for another Argo suite is not the suite's set-up: three suites share the lock
	// (test/realstack/argo, test/e2e/argo, test/conformance), and under `go test ./...` one may
	// queue behind both others for longer than realstack.SetUpTimeout. go test's -timeout bounds it.
	lockCtx, cancelLock := context.WithTimeout(context.WithoutCancel(ctx), lockWait)
	defer cancelLock()
	if h.lock, err = acquireLock(lockCtx); err != nil {
		return nil, err
	}
	// The set-up's own clock starts once the lock is held: a caller's deadline (the suite's
	// set-up timeout) kept running through the wait and killed the executor's build after it.
	ctx, cancelSetUp := context.WithTimeout(context.WithoutCancel(ctx), setUpAfterLock)
	defer cancelSetUp()
	if h.workdir, err = os.MkdirTemp("", "trainstep-argoharness-"); err != nil {
		return nil, err
	}
	// Argo's prerequisites (docs/testing.md, "How each engine runs"), then the plugin's own manifests.
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}},
		// No metrics server: its fixed port (9090) may be taken by another suite's controller.
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "workflow-controller-configmap"},
			Data: map[string]string{"metricsConfig": "enabled: false\n", "telemetryConfig": "enabled: false\n"}},
	} {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating %s: %w", obj.GetName(), err)
		}
	}
	root, err := repoRoot(ctx)
	if err != nil {
		return nil, err
	}
	manifests := filepath.Join(root, "manifests", "argo")
	// The admission policy too: the plugin runs with its ServiceAccount narrowed as installed.
	if err := h.apply(ctx, filepath.Join(manifests, "trainstep-executor-plugin-configmap.yaml"), filepath.Join(manifests, "rbac.yaml"),
		filepath.Join(manifests, "admission-policy.yaml")); err != nil {
		return nil, err
	}
	pluginCfg, err := h.serviceAccountKubeconfig(ctx, opts, "trainstep-executor-plugin")
	if err != nil {
		return nil, err
	}
	if h.agentCfg, err = h.serviceAccountKubeconfig(ctx, opts, "trainstep-workflow"); err != nil {
		return nil, err
	}

	// The controller: namespaced, so it manages Namespace alone and a plugin there reaches no
	// other namespace's workflows.
	if _, err := h.startController(procCtx, "workflow-controller", "--namespaced", "--namespace", Namespace); err != nil {
		return nil, err
	}

	// The plugin: the real binary, with the token file the agent's init container writes.
	h.bin = filepath.Join(h.workdir, "executor")
	build := exec.CommandContext(ctx, "go", "build", "-o", h.bin, filepath.Join(root, "cmd", "executor"))
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the executor: %w\n%s", err, out)
	}
	if err := os.MkdirAll(TokenDir, 0o770); err != nil {
		return nil, fmt.Errorf("creating %s (argoexec hard-codes it; run as root): %w", TokenDir, err)
	}
	if err := os.WriteFile(filepath.Join(TokenDir, "token"), []byte("placeholder"), 0o440); err != nil {
		return nil, err
	}
	h.pluginArgs = []string{"argo-plugin", "--kubeconfig", pluginCfg, "--namespace", Namespace,
		"--addr", PluginAddr, "--token-file", filepath.Join(TokenDir, "token"), "--hold-max", "10s", "--requeue", "1s"}
	if err := h.startPlugin(ctx); err != nil {
		return nil, err
	}
	return h, nil
}

// startController starts Argo's workflow-controller, named name in the logs, with args after
// the harness's own (--namespace and how it runs: --namespaced, --configmap).
func (h *Harness) startController(ctx context.Context, name string, args ...string) (done chan struct{}, err error) {
	requeue := h.opts.RequeueTime
	if requeue <= 0 {
		requeue = time.Second
	}
	return h.startProcess(ctx, name, []string{
		"LEADER_ELECTION_IDENTITY=trainstep-e2e", "ARGO_EXECUTOR_PLUGINS=true",
		"DEFAULT_REQUEUE_TIME=" + requeue.String(), "ARGO_AGENT_PATCH_RATE=" + requeue.String(),
	}, filepath.Join(h.Assets, "workflow-controller"), append([]string{"--kubeconfig", h.opts.Kubeconfig,
		"--executor-image", executorImage(h.Assets), "--loglevel", "info"}, args...)...)
}

// InstanceLabel is the label by which a controller with an instance ID (StartClusterController)
// takes a Workflow as its own; a controller without one (the harness's) leaves such Workflows.
const InstanceLabel = "workflows.argoproj.io/controller-instanceid"

// StartClusterController runs, until the test ends, a second workflow-controller as Argo's
// cluster install runs it: in namespace (created here) and managing every namespace, so that a
// plugin in namespace is added to the agent pods of workflows everywhere. It has an instance ID,
// instanceID, and takes only the Workflows labelled InstanceLabel=instanceID (the harness's
// controller leaves those), so the two do not share a Workflow.
func (h *Harness) StartClusterController(t testing.TB, namespace, instanceID string) {
	t.Helper()
	const configMap = "cluster-workflow-controller-configmap"
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: configMap},
			Data: map[string]string{"instanceID": instanceID, "metricsConfig": "enabled: false\n", "telemetryConfig": "enabled: false\n"}},
	} {
		if err := h.Client.Create(t.Context(), obj); err != nil && !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err, "creating %s", obj.GetName())
		}
	}
	name := "workflow-controller " + namespace
	ctx, stop := context.WithCancel(h.procCtx)
	done, err := h.startController(ctx, name, "--namespace", namespace, "--configmap", configMap)
	require.NoError(t, err)
	t.Cleanup(func() {
		stop()
		<-done
		if t.Failed() {
			t.Logf("%s:\n%s", name, tail(h.log(name), 60))
		}
	})
}

// startPlugin starts the plugin binary and returns once it is ready: listening, and its
// informers have listed (with the plugin ServiceAccount's RBAC).
func (h *Harness) startPlugin(ctx context.Context) error {
	pctx, stop := context.WithCancel(h.procCtx)
	done, err := h.startProcess(pctx, "plugin", nil, h.bin, h.pluginArgs...)
	if err != nil {
		stop()
		return err
	}
	h.mu.Lock()
	h.pluginStop, h.pluginDone = stop, done
	h.mu.Unlock()
	return h.waitReady(ctx, PluginAddr, "plugin")
}

// waitReady waits for the plugin process logged as name to answer /readyz at addr.
func (h *Harness) waitReady(ctx context.Context, addr, name string) error {
	deadline := time.Now().Add(h.opts.ReadyTimeout)
	for {
		ok, err := ready(ctx, addr)
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the plugin did not become ready at %s: %w\n%s", addr, err, tail(h.log(name), 30))
		}
		time.Sleep(Poll) // polling a subprocess's readiness: nothing to wait on
	}
}

// KillPlugin kills the plugin process at once (SIGKILL, as the kernel's OOM killer or a lost
// node would: no SIGTERM sweep) and waits for it to be gone.
func (h *Harness) KillPlugin(t testing.TB) {
	t.Helper()
	h.mu.Lock()
	pid, stop, done := h.pids["plugin"], h.pluginStop, h.pluginDone
	h.mu.Unlock()
	proc, err := os.FindProcess(pid)
	require.NoError(t, err)
	require.NoError(t, proc.Kill())
	<-done
	stop()
}

// StopPlugin stops the plugin process as the kubelet does when the agent pod is deleted
// (a signal, then its sweep) and waits for it to exit.
func (h *Harness) StopPlugin(t testing.TB) {
	t.Helper()
	h.mu.Lock()
	stop, done := h.pluginStop, h.pluginDone
	h.mu.Unlock()
	stop()
	<-done
}

// StartPlugin starts the plugin process again after KillPlugin or StopPlugin (the kubelet
// restarting the sidecar) and returns once it is ready. It may be called from a Cleanup.
func (h *Harness) StartPlugin(t testing.TB) {
	t.Helper()
	require.NoError(t, h.startPlugin(context.WithoutCancel(t.Context())))
}

// StartJanitor applies the janitor's ServiceAccount and RBAC from manifests/argo/janitor.yaml
// (not its Deployment: there is no kubelet) and runs the real `executor argo-janitor` binary as
// that ServiceAccount until the test ends.
func (h *Harness) StartJanitor(t testing.TB) {
	t.Helper()
	root, err := repoRoot(t.Context())
	require.NoError(t, err)
	require.NoError(t, h.applyExcept(t.Context(), "Deployment", filepath.Join(root, "manifests", "argo", "janitor.yaml")))
	cfg, err := h.serviceAccountKubeconfig(t.Context(), h.opts, "trainstep-argo-janitor")
	require.NoError(t, err)
	ctx, stop := context.WithCancel(h.procCtx)
	done, err := h.startProcess(ctx, "janitor", nil, h.bin, "argo-janitor", "--kubeconfig", cfg, "--namespaces", Namespace,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--log-format", "text")
	require.NoError(t, err)
	t.Cleanup(func() {
		stop()
		<-done
		if t.Failed() {
			t.Logf("janitor:\n%s", tail(h.log("janitor"), 40))
		}
	})
}

func ready(ctx context.Context, addr string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", http.NoBody)
	if err != nil {
		return false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("/readyz: %s", resp.Status)
	}
	return true, nil
}

// Stop ends the processes (interrupt, then kill after a delay), removes the token and the work
// directory, and releases the lock.
func (h *Harness) Stop() {
	h.cancel()
	for _, d := range h.done {
		<-d
	}
	if h.workdir != "" {
		_ = os.RemoveAll(h.workdir)
	}
	if h.Pods != nil {
		_ = h.Pods.Close()
	}
	if h.lock != nil { // the token is another suite's while it holds the lock
		if err := os.RemoveAll(TokenDir); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		releaseLock(h.lock)
	}
}

// DumpLogs writes the end of every process's output (for a failed suite).
func (h *Harness) DumpLogs(w io.Writer) {
	h.mu.Lock()
	names := make([]string, 0, len(h.logs))
	for n := range h.logs {
		names = append(names, n)
	}
	h.mu.Unlock()
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "----- %s -----\n%s\n", n, tail(h.log(n), 60))
	}
	if h.Pods != nil {
		h.Pods.DumpLogs(w, 60)
	}
}

func (h *Harness) log(name string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if b := h.logs[name]; b != nil {
		return b.String()
	}
	return ""
}

// PluginPID is the process id of the plugin binary.
func (h *Harness) PluginPID() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pids["plugin"]
}

func repoRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("locating the trainstep module: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// apply creates every object of the files in Namespace.
func (h *Harness) apply(ctx context.Context, files ...string) error {
	return h.applyExcept(ctx, "", files...)
}

// applyExcept is apply leaving out the objects of one kind ("": none).
func (h *Harness) applyExcept(ctx context.Context, skip string, files ...string) error {
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return fmt.Errorf("reading %s: %w", f, err)
			}
			if len(u.Object) == 0 || u.GetKind() == skip {
				continue
			}
			if u.GetKind() != "ClusterRole" && u.GetKind() != "ClusterRoleBinding" {
				u.SetNamespace(Namespace)
			}
			if err := h.Client.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating %s %s from %s: %w", u.GetKind(), u.GetName(), f, err)
			}
		}
	}
	return nil
}

func (h *Harness) serviceAccountKubeconfig(ctx context.Context, opts Options, sa string) (string, error) {
	cfg, err := opts.ServiceAccountConfig(ctx, Namespace, sa)
	if err != nil {
		return "", err
	}
	path := filepath.Join(h.workdir, sa+".kubeconfig")
	return path, kubeconfig.Write(cfg, Namespace, path)
}

// startProcess runs a long-lived process until ctx ends, its output kept for failure reports;
// done is closed when it has exited.
func (h *Harness) startProcess(ctx context.Context, name string, extraEnv []string, bin string, args ...string) (done chan struct{}, err error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), extraEnv...)
	buf := &harnessutil.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = buf, buf
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 20 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	done = make(chan struct{})
	h.mu.Lock()
	h.logs[name] = buf
	h.pids[name] = cmd.Process.Pid
	h.done = append(h.done, done)
	h.mu.Unlock()
	go func() { _ = cmd.Wait(); close(done) }()
	return done, nil
}

// RSSMB is a process's resident set size and its peak, from /proc.
func RSSMB(pid int) (rss, peak float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		for key, dst := range map[string]*float64{"VmRSS:": &rss, "VmHWM:": &peak} {
			if v, ok := strings.CutPrefix(line, key); ok {
				var kb float64
				if _, err := fmt.Sscanf(strings.TrimSpace(v), "%f kB", &kb); err == nil {
					*dst = kb / 1024
				}
			}
		}
	}
	return rss, peak, nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
