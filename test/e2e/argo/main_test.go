// Package argo_test runs the Argo face end to end with Argo's own code: the pinned
// workflow-controller runs as a local process against the test apiserver, creates the agent pod
// of each workflow, and since no kubelet exists a fixture runs that pod's `argoexec agent`
// containers (init, then main) as local processes with the pod's own env, beside the trainstep
// plugin (the real `executor argo-plugin` binary). The plugin and the agent authenticate as
// their ServiceAccounts from manifests/argo, so its RBAC is exercised too.
package argo_test

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
	"strings"
	"sync"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/trainstep/trainstep/test/internal/testenv"
	"github.com/trainstep/trainstep/test/internal/trainersim"
)

// Namespace is where Argo's controller, the workflows and the plugin live (the manifests' own).
const Namespace = "argo"

// PluginAddr is the plugin's address: the first containerPort of manifests/argo/plugin.yaml.
const PluginAddr = "127.0.0.1:7356"

var (
	env      *testenv.Env
	sim      *trainersim.Simulator
	c        client.Client
	assets   string
	workdir  string
	agentCfg string // kubeconfig of the workflow ServiceAccount (the agent's identity)
	logsMu   sync.Mutex
	logs     = map[string]*syncBuffer{}
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctrllog.SetLogger(logr.Discard())
	assets = os.Getenv("ARGO_ASSETS")
	for _, f := range []string{"workflow-controller", "argoexec", "crds"} {
		if assets == "" {
			fmt.Fprintln(os.Stderr, "ARGO_ASSETS is not set: run `make test-assets` to build Argo's workflow-controller and argoexec, then set ARGO_ASSETS to their directory (`make test` does both)")
			return 1
		}
		if _, err := os.Stat(filepath.Join(assets, f)); err != nil {
			fmt.Fprintf(os.Stderr, "%s is missing from ARGO_ASSETS=%s: run `make test-assets`\n", f, assets)
			return 1
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start, stop := context.WithTimeout(ctx, 3*time.Minute)
	e, err := testenv.Start(start, testenv.Options{ControllerManager: true, CRDDirs: []string{filepath.Join(assets, "crds")}})
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the control plane:", err)
		return 1
	}
	env = e
	code := 1
	defer func() {
		cancel()
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
		if code != 0 {
			logsMu.Lock()
			defer logsMu.Unlock()
			for name, b := range logs {
				fmt.Fprintf(os.Stderr, "----- %s -----\n%s\n", name, tail(b.String(), 60))
			}
		}
	}()
	if err := setUp(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code = m.Run()
	if err := os.RemoveAll(tokenDir); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return code
}

func setUp(ctx context.Context) error {
	var err error
	if sim, err = trainersim.Start(ctx, env.Config, trainersim.ByLabel); err != nil {
		return err
	}
	if err := wfv1.AddToScheme(env.Scheme); err != nil {
		return err
	}
	if c, err = client.New(env.Config, client.Options{Scheme: env.Scheme}); err != nil {
		return err
	}
	if workdir, err = os.MkdirTemp("", "trainstep-e2e-argo-"); err != nil {
		return err
	}
	// Argo's prerequisites (docs/testing.md, "How each engine runs"), then the plugin's own manifests.
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}},
		// No metrics server: its fixed port (9090) may be taken by another suite's controller.
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "workflow-controller-configmap"},
			Data: map[string]string{"metricsConfig": "enabled: false\n", "telemetryConfig": "enabled: false\n"}},
	} {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s: %w", obj.GetName(), err)
		}
	}
	// The admission policy too: the plugin runs with its ServiceAccount narrowed as installed.
	if err := applyManifests(ctx, "../../../manifests/argo/trainstep-executor-plugin-configmap.yaml", "../../../manifests/argo/rbac.yaml",
		"../../../manifests/argo/admission-policy.yaml"); err != nil {
		return err
	}
	pluginCfg, err := serviceAccountKubeconfig("trainstep-executor-plugin")
	if err != nil {
		return err
	}
	if agentCfg, err = serviceAccountKubeconfig("trainstep-workflow"); err != nil {
		return err
	}

	// The controller.
	if err := startProcess(ctx, "workflow-controller", []string{
		"LEADER_ELECTION_IDENTITY=trainstep-e2e", "ARGO_EXECUTOR_PLUGINS=true", "DEFAULT_REQUEUE_TIME=1s", "ARGO_AGENT_PATCH_RATE=1s",
	}, filepath.Join(assets, "workflow-controller"), "--kubeconfig", env.Kubeconfig, "--namespaced", "--namespace", Namespace,
		"--executor-image", "quay.io/argoproj/argoexec:v3.7.3", "--loglevel", "info"); err != nil {
		return err
	}

	// The plugin: the real binary, with the token file the agent's init container writes.
	bin := filepath.Join(workdir, "executor")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "../../../cmd/executor")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building the executor: %w\n%s", err, out)
	}
	if err := os.MkdirAll(tokenDir, 0o770); err != nil {
		return fmt.Errorf("creating %s (argoexec hard-codes it; run as root): %w", tokenDir, err)
	}
	if err := os.WriteFile(filepath.Join(tokenDir, "token"), []byte("placeholder"), 0o440); err != nil {
		return err
	}
	if err := startProcess(ctx, "plugin", nil, bin, "argo-plugin", "--kubeconfig", pluginCfg, "--namespace", Namespace,
		"--addr", PluginAddr, "--token-file", filepath.Join(tokenDir, "token"), "--hold-max", "10s", "--requeue", "1s"); err != nil {
		return err
	}
	// Ready: listening, and the informers have listed (with the plugin ServiceAccount's RBAC).
	deadline := time.Now().Add(testenv.Timeout)
	for {
		resp, err := http.Get("http://" + PluginAddr + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the plugin did not become ready at %s: %w", PluginAddr, err)
		}
		time.Sleep(testenv.Interval) // polling a subprocess's readiness: nothing to wait on
	}
}

// tokenDir is where `argoexec agent init` writes the plugin's token (hard-coded in argoexec).
const tokenDir = "/var/run/argo/trainstep-executor-plugin"

// applyManifests creates every object of the files in Namespace.
func applyManifests(ctx context.Context, files ...string) error {
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
			if len(u.Object) == 0 {
				continue
			}
			switch u.GetKind() {
			case "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			default:
				u.SetNamespace(Namespace)
			}
			if err := c.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating %s %s from %s: %w", u.GetKind(), u.GetName(), f, err)
			}
		}
	}
	return nil
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the ServiceAccount (a client
// certificate for its user name), so RBAC sees exactly that ServiceAccount.
func serviceAccountKubeconfig(sa string) (string, error) {
	cfg, err := env.UserConfig("system:serviceaccount:"+Namespace+":"+sa, "system:serviceaccounts", "system:serviceaccounts:"+Namespace)
	if err != nil {
		return "", err
	}
	return writeKubeconfig(cfg, filepath.Join(workdir, sa+".kubeconfig"))
}

func writeKubeconfig(cfg *rest.Config, path string) (string, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "user", Namespace: Namespace}
	kc.CurrentContext = "test"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}

// startProcess runs a long-lived process until ctx ends, its output kept for failure reports.
func startProcess(ctx context.Context, name string, extraEnv []string, bin string, args ...string) error {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), extraEnv...)
	buf := &syncBuffer{}
	logsMu.Lock()
	logs[name] = buf
	logsMu.Unlock()
	cmd.Stdout, cmd.Stderr = buf, buf
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 20 * time.Second
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	procsMu.Lock()
	procs[name] = cmd.Process.Pid
	procsMu.Unlock()
	go func() { _ = cmd.Wait() }()
	return nil
}

var (
	procsMu sync.Mutex
	procs   = map[string]int{} // name → pid of the processes startProcess runs
)

// rssMB is a process's resident set size and its peak, from /proc.
func rssMB(pid int) (rss, peak float64, err error) {
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

// syncBuffer is a bytes.Buffer a process writes while a test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
