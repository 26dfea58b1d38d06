package argoharness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/test/internal/harnessutil"
)

// Submit creates the Workflow of manifest (YAML, strictly decoded) in Namespace.
func (h *Harness) Submit(t testing.TB, manifest string) *wfv1.Workflow {
	t.Helper()
	wf := &wfv1.Workflow{}
	require.NoError(t, yaml.UnmarshalStrict([]byte(manifest), wf))
	wf.Namespace = Namespace
	require.NoError(t, h.Client.Create(t.Context(), wf))
	return wf
}

// Get reads the Workflow name.
func (h *Harness) Get(ctx context.Context, name string) (*wfv1.Workflow, error) {
	wf := &wfv1.Workflow{}
	return wf, h.Client.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: name}, wf)
}

// WaitPhase waits until the Workflow has completed and returns it.
func (h *Harness) WaitPhase(t testing.TB, name string, timeout time.Duration) *wfv1.Workflow {
	t.Helper()
	wf := &wfv1.Workflow{}
	require.Eventually(t, func() bool {
		return h.Client.Get(t.Context(), client.ObjectKey{Namespace: Namespace, Name: name}, wf) == nil && wf.Status.Phase.Completed()
	}, timeout, Poll, "workflow %s did not finish: %s %s", name, wf.Status.Phase, Nodes(wf))
	return wf
}

// Nodes is a one-line-per-node summary of a Workflow's nodes, for failure messages.
func Nodes(wf *wfv1.Workflow) string {
	var b strings.Builder
	for _, n := range wf.Status.Nodes {
		fmt.Fprintf(&b, "  %s %s %s: %s\n", n.DisplayName, n.Type, n.Phase, n.Message)
	}
	return b.String()
}

// Output is the value of a node's output parameter, "" when it has none.
func Output(n *wfv1.NodeStatus, name string) string {
	if n == nil || n.Outputs == nil {
		return ""
	}
	for _, p := range n.Outputs.Parameters {
		if p.Name == name && p.Value != nil {
			return p.Value.String()
		}
	}
	return ""
}

// RunAgent waits for the agent pod the controller creates for the workflow and runs its
// containers as local processes: `argoexec agent init` (writes the plugin's token), then
// `argoexec agent main` (calls the plugin, patches the WorkflowTaskSet) until the test ends.
// The agent calls the harness's one plugin process, which reads the one TokenDir: two agents at
// once lock each other out (RunAgentWithSidecar does not).
func (h *Harness) RunAgent(t testing.TB, wfName string, timeout time.Duration) {
	t.Helper()
	pod, initC, mainC := h.agentPod(t, wfName, timeout)
	// The init container writes a fresh token for each agent pod; the plugin re-reads the file.
	require.NoError(t, os.RemoveAll(TokenDir))
	runAgentInit(t, h.agentCommand(t.Context(), pod, initC), TokenDir+"/token")
	h.runAgentMain(t, wfName, func(ctx context.Context) *exec.Cmd { return h.agentCommand(ctx, pod, mainC) }, "plugin")
}

// RunAgentWithSidecar is RunAgent with the agent pod's own plugin sidecar, as a cluster runs it:
// a plugin process of its own on a port of its own, and the agent's containers in a mount
// namespace whose /var/run/argo (argoexec hard-codes it) is a directory of their own, where the
// plugin reads its token. Workflows whose agents run this way run side by side. The sidecar stops
// after the agent, when the test ends.
func (h *Harness) RunAgentWithSidecar(t testing.TB, wfName string, timeout time.Duration) {
	t.Helper()
	pod, initC, mainC := h.agentPod(t, wfName, timeout)
	varRunArgo := filepath.Join(h.workdir, "agents", pod.Name)
	require.NoError(t, os.MkdirAll(varRunArgo, 0o770))
	rel, err := filepath.Rel(argoRunDir, TokenDir)
	require.NoError(t, err)
	token := filepath.Join(varRunArgo, rel, "token")
	addr := harnessutil.FreeAddr(t)
	ownNamespace := func(cmd *exec.Cmd) *exec.Cmd {
		cmd.Env = append(cmd.Env, "ARGO_PLUGIN_ADDRESSES="+`["http://`+addr+`"]`)
		// unshare execs the shell, and the shell execs argoexec: the command's process is argoexec.
		cmd.Args = append([]string{"unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
			`mount --bind "$0" ` + argoRunDir + ` && exec "$@"`, varRunArgo, cmd.Path}, cmd.Args[1:]...)
		cmd.Path = unshareBin(t)
		return cmd
	}

	// As in the pod: the init container first (it writes the token), then the sidecar and main.
	runAgentInit(t, ownNamespace(h.agentCommand(t.Context(), pod, initC)), token)

	name := "plugin " + wfName
	// No metrics listener: its port is the harness's one plugin's.
	args := withFlag(withFlag(withFlag(h.pluginArgs, "--addr", addr), "--token-file", token), "--metrics-addr", "off")
	ctx, stop := context.WithCancel(h.procCtx)
	done, err := h.startProcess(ctx, name, nil, h.bin, args...)
	require.NoError(t, err)
	t.Cleanup(func() { // registered before the agent's, so it runs after: the sidecar outlives the agent
		stop()
		<-done
	})
	require.NoError(t, h.waitReady(t.Context(), addr, name), "the agent's plugin sidecar")
	h.runAgentMain(t, wfName, func(ctx context.Context) *exec.Cmd { return ownNamespace(h.agentCommand(ctx, pod, mainC)) }, name)
}

// argoRunDir is the directory argoexec hard-codes: an agent pod's emptyDir in a cluster.
const argoRunDir = "/var/run/argo"

// agentPod waits for the agent pod of workflow wfName and returns it with its init and main
// containers.
func (h *Harness) agentPod(t testing.TB, wfName string, timeout time.Duration) (pod *corev1.Pod, initC, mainC *corev1.Container) {
	t.Helper()
	pod = &corev1.Pod{}
	require.Eventually(t, func() bool {
		l := &corev1.PodList{}
		err := h.Client.List(t.Context(), l, client.InNamespace(Namespace), client.MatchingLabels{
			"workflows.argoproj.io/workflow": wfName, "workflows.argoproj.io/component": "agent"})
		if err != nil || len(l.Items) == 0 {
			return false
		}
		*pod = l.Items[0]
		return true
	}, timeout, Poll, "the controller must create the agent pod")

	var plugin *corev1.Container
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == "init" {
			initC = &pod.Spec.InitContainers[i]
		}
	}
	for i := range pod.Spec.Containers {
		switch pod.Spec.Containers[i].Name {
		case "main":
			mainC = &pod.Spec.Containers[i]
		case "trainstep-executor-plugin":
			plugin = &pod.Spec.Containers[i]
		}
	}
	require.NotNil(t, initC, "agent pod %s has no init container", pod.Name)
	require.NotNil(t, mainC, "agent pod %s has no main container", pod.Name)
	require.NotNil(t, plugin, "the controller must inject the plugin sidecar from manifests/argo")
	return pod, initC, mainC
}

// runAgentMain starts `argoexec agent main` (made by command) and stops it when the test ends;
// plugin names the log of the plugin it calls, for a failed test's report.
func (h *Harness) runAgentMain(t testing.TB, wfName string, command func(context.Context) *exec.Cmd, plugin string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	main := command(ctx)
	buf := &harnessutil.SyncBuffer{}
	main.Stdout, main.Stderr = buf, buf
	h.mu.Lock()
	h.logs["agent "+wfName] = buf
	h.mu.Unlock()
	require.NoError(t, main.Start())
	h.mu.Lock()
	h.pids["agent "+wfName] = main.Process.Pid
	h.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- main.Wait() }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			t.Logf("argoexec agent main stopped: %v", err) // killed by cancel: an error is expected
		case <-time.After(30 * time.Second):
			t.Error("argoexec agent main did not stop")
		}
		if t.Failed() {
			t.Logf("argoexec agent main:\n%s", tail(buf.String(), 40))
			t.Logf("%s:\n%s", plugin, tail(h.log(plugin), 40))
		}
	})
}

// runAgentInit runs `argoexec agent init` (init) to its end and checks it wrote token.
func runAgentInit(t testing.TB, init *exec.Cmd, token string) {
	t.Helper()
	out, err := init.CombinedOutput()
	require.NoError(t, err, "argoexec agent init: %s", out)
	_, err = os.Stat(token)
	require.NoError(t, err, "argoexec agent init must write the plugin's token")
}

// withFlag is args with flag's value replaced.
func withFlag(args []string, flag, value string) []string {
	out := slices.Clone(args)
	i := slices.Index(out, flag)
	if i < 0 || i+1 >= len(out) {
		return append(out, flag, value)
	}
	out[i+1] = value
	return out
}

// unshareBin is util-linux's unshare, which runs an agent in a mount namespace of its own.
func unshareBin(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("unshare")
	require.NoError(t, err, "RunAgentWithSidecar needs util-linux's unshare (and root)")
	return p
}

// agentCommand is a container of the agent pod as a local process: its args, its env (downward
// API fields resolved from the pod) and the workflow ServiceAccount's kubeconfig.
func (h *Harness) agentCommand(ctx context.Context, pod *corev1.Pod, ctr *corev1.Container) *exec.Cmd {
	args := append([]string{}, ctr.Command...)
	if len(args) > 0 {
		args = args[1:] // argoexec
	}
	args = append(args, ctr.Args...)
	args = append(args, "--kubeconfig", h.agentCfg)
	cmd := exec.CommandContext(ctx, h.Assets+"/argoexec", args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+h.agentCfg)
	for _, e := range ctr.Env {
		v := e.Value
		if f := e.ValueFrom; f != nil && f.FieldRef != nil {
			switch f.FieldRef.FieldPath {
			case "metadata.name":
				v = pod.Name
			case "metadata.namespace":
				v = pod.Namespace
			}
		}
		cmd.Env = append(cmd.Env, e.Name+"="+v)
	}
	// The plugin listens on 127.0.0.1 here; in the pod it is localhost of the shared network.
	cmd.Env = append(cmd.Env, "ARGO_POD_NAME="+pod.Name)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 20 * time.Second
	return cmd
}
