package argoharness

// Pods the workflow-controller creates run here with no kubelet: RunPod runs a pod's containers
// as local processes, the way RunAgent runs the agent pod's, and writes the pod status a kubelet
// would write, so the controller marks the node from the pod as it does in a cluster. It is
// written for pods of Argo's executor image, e.g. a resource template's pod: `argoexec init`, then
// `argoexec emissary -- argoexec resource <action>` (workflow/controller/workflowpod.go; no wait
// container unless the template archives logs).
//
// Each container runs in a PID namespace of its own (its processes end with its first one) and a
// mount namespace of its own in which
//   - the pod's emptyDir volumes are bind-mounted at their mountPaths, so /var/run/argo (which
//     argoexec hard-codes) is the pod's own and pods running at once do not share it;
//   - /tmp is the container's own unless a volume is mounted there (argoexec writes the resource
//     manifest to /tmp/manifest.yaml in both containers);
//   - the termination message path is a file of the container's, read back into its status;
//   - $HOME is read-only when the container's root filesystem is (kubectl's discovery cache then
//     fails to write and stays in memory, as in the real pod).
//
// The env is the container's own (downward API fields resolved from the pod) on a clean base:
// PATH finds argoexec in ARGO_ASSETS, and KUBECONFIG authenticates as the pod's ServiceAccount
// through Options.ServiceAccountConfig instead of a projected token. Volumes other than emptyDir
// (the ServiceAccount token the apiserver adds) are not mounted, and $(VAR) references in
// command and args are not expanded (Argo's executor pods use none).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/test/internal/harnessutil"
	"github.com/trainstep/trainstep/test/internal/kubeconfig"
)

// Labels the workflow-controller puts on the pods it creates.
const (
	labelWorkflow  = "workflows.argoproj.io/workflow"
	labelComponent = "workflows.argoproj.io/component"
)

// podsRoot holds the pods' directories. Not under /tmp: each container gets its own /tmp, which
// would hide the pod's directory (its kubeconfig, its volumes) from the container.
const podsRoot = "/var/tmp"

// stdPath is the PATH of a container after ARGO_ASSETS (the argoexec image puts argoexec on it).
const stdPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// stopGrace bounds a container's exit after SIGTERM when its pod run is cancelled.
const stopGrace = 10 * time.Second

// PodRun is a pod whose containers run as local processes.
type PodRun struct {
	// Name is the pod's name.
	Name string

	h    *Harness
	pod  *corev1.Pod
	dir  string
	kube string // the pod's kubeconfig, inside dir
	done chan struct{}

	mu      sync.Mutex
	running map[string]int // container name → pid, while it runs
	phase   corev1.PodPhase
	err     error
}

// Done is closed when every container has exited and the final status was written (or the run
// was cancelled).
func (r *PodRun) Done() <-chan struct{} { return r.done }

// Result is the pod's final phase and what went wrong running it (nil when the containers ran and
// their status was written, whatever their exit codes). Read it after Done.
func (r *PodRun) Result() (corev1.PodPhase, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.phase, r.err
}

// PIDs are the processes the pod holds now: each running container's process and its
// descendants (emissary's child, e.g.).
func (r *PodRun) PIDs() []int {
	r.mu.Lock()
	roots := make([]int, 0, len(r.running))
	for _, pid := range r.running {
		roots = append(roots, pid)
	}
	r.mu.Unlock()
	return withDescendants(roots)
}

// RunPod starts pod's containers as local processes (init containers one after another, then the
// containers together) and returns; the run goes on until the containers exit or ctx ends (the
// containers then get SIGTERM, as on pod deletion). The pod must be as read from the apiserver
// (its UID is in the env of Argo's containers).
func (h *Harness) RunPod(ctx context.Context, pod *corev1.Pod) (*PodRun, error) {
	dir, err := h.podDir(pod.Name)
	if err != nil {
		return nil, err
	}
	cfg, err := h.serviceAccountConfig(ctx, pod.Spec.ServiceAccountName)
	if err != nil {
		return nil, err
	}
	r := &PodRun{Name: pod.Name, h: h, pod: pod.DeepCopy(), dir: dir, kube: filepath.Join(dir, "kubeconfig"),
		done: make(chan struct{}), running: map[string]int{}}
	if err := kubeconfig.Write(cfg, pod.Namespace, r.kube); err != nil {
		return nil, err
	}
	go r.run(ctx)
	return r, nil
}

// podDir makes the pod's directory under the harness's pods directory.
func (h *Harness) podDir(name string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.podsDir == "" {
		d, err := os.MkdirTemp(podsRoot, "trainstep-argoharness-pods-")
		if err != nil {
			return "", fmt.Errorf("creating the pods' directory: %w", err)
		}
		h.podsDir = d
	}
	dir := filepath.Join(h.podsDir, name)
	return dir, os.MkdirAll(dir, 0o755)
}

// serviceAccountConfig is the config of ServiceAccount Namespace/sa (default when empty), its
// certificate and CA inline: a file under /tmp would be hidden inside the container.
func (h *Harness) serviceAccountConfig(ctx context.Context, sa string) (*rest.Config, error) {
	if sa == "" {
		sa = "default"
	}
	h.mu.Lock()
	cfg := h.saCfgs[sa]
	h.mu.Unlock()
	if cfg != nil {
		return cfg, nil
	}
	if h.saConfig == nil {
		return nil, errors.New("the harness has no ServiceAccountConfig")
	}
	cfg, err := h.saConfig(ctx, sa)
	if err != nil {
		return nil, fmt.Errorf("a config for ServiceAccount %s: %w", sa, err)
	}
	if err := rest.LoadTLSFiles(cfg); err != nil {
		return nil, err
	}
	cfg.CAFile, cfg.CertFile, cfg.KeyFile = "", "", ""
	h.mu.Lock()
	h.saCfgs[sa] = cfg
	h.mu.Unlock()
	return cfg, nil
}

func (r *PodRun) run(ctx context.Context) {
	defer close(r.done)
	defer os.RemoveAll(r.dir) // the emptyDirs hold a copy of argoexec (150 MB) each
	phase, err := r.runContainers(ctx)
	r.mu.Lock()
	r.phase, r.err = phase, err
	r.mu.Unlock()
}

// runContainers runs the containers and writes the status at each step a kubelet reports.
func (r *PodRun) runContainers(ctx context.Context) (corev1.PodPhase, error) {
	spec := r.pod.Spec
	start := metav1.Now()
	st := corev1.PodStatus{Phase: corev1.PodPending, StartTime: &start, HostIP: "127.0.0.1", PodIP: "127.0.0.1",
		PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}}, HostIPs: []corev1.HostIP{{IP: "127.0.0.1"}}}
	for _, c := range spec.InitContainers {
		st.InitContainerStatuses = append(st.InitContainerStatuses, waiting(c, "PodInitializing"))
	}
	for _, c := range spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, waiting(c, "PodInitializing"))
	}
	setConditions(&st, false, false)

	for i, c := range spec.InitContainers {
		st.InitContainerStatuses[i] = running(c)
		if err := r.writeStatus(ctx, st); err != nil {
			return "", err
		}
		exit, err := r.runContainer(ctx, c, i)
		if err != nil {
			return "", err
		}
		st.InitContainerStatuses[i] = exit
		if exit.State.Terminated.ExitCode != 0 {
			st.Phase = corev1.PodFailed
			return st.Phase, r.writeStatus(ctx, st)
		}
	}

	for i, c := range spec.Containers {
		st.ContainerStatuses[i] = running(c)
	}
	st.Phase = corev1.PodRunning
	setConditions(&st, true, true)
	if err := r.writeStatus(ctx, st); err != nil {
		return "", err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(spec.Containers))
	for i, c := range spec.Containers {
		wg.Go(func() {
			exit, err := r.runContainer(ctx, c, len(spec.InitContainers)+i)
			if err == nil {
				st.ContainerStatuses[i] = exit
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	st.Phase = corev1.PodSucceeded
	for _, s := range st.ContainerStatuses {
		if s.State.Terminated.ExitCode != 0 {
			st.Phase = corev1.PodFailed
		}
	}
	setConditions(&st, true, false)
	return st.Phase, r.writeStatus(ctx, st)
}

func waiting(c corev1.Container, reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
}

func running(c corev1.Container) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image, Started: ptrTo(true), Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}
}

func ptrTo[T any](v T) *T { return &v }

// setConditions writes the pod conditions a kubelet keeps (scheduling is taken as done).
func setConditions(st *corev1.PodStatus, initialized, ready bool) {
	b := func(v bool) corev1.ConditionStatus {
		if v {
			return corev1.ConditionTrue
		}
		return corev1.ConditionFalse
	}
	now := metav1.Now()
	st.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodInitialized, Status: b(initialized), LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: b(ready), LastTransitionTime: now},
		{Type: corev1.PodReady, Status: b(ready), LastTransitionTime: now},
	}
}

// writeStatus replaces the pod's status, as the kubelet owns it.
func (r *PodRun) writeStatus(ctx context.Context, st corev1.PodStatus) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod := &corev1.Pod{}
		if err := r.h.Client.Get(ctx, client.ObjectKeyFromObject(r.pod), pod); err != nil {
			return err
		}
		pod.Status = *st.DeepCopy()
		return r.h.Client.Status().Update(ctx, pod)
	})
	select {
	case <-ctx.Done():
		// Cancelled: the pod is being deleted, or the test ends; a kubelet would write no more.
		return nil
	default:
	}
	if err != nil && !apierrors.IsNotFound(err) { // deleted: nobody reads it
		return fmt.Errorf("writing the status of pod %s: %w", r.pod.Name, err)
	}
	return nil
}

// mount is a bind mount inside a container's mount namespace.
type mount struct {
	src, dst string
	file     bool // a file, not a directory
	ro       bool
}

// runContainer runs container c (the idx-th of the pod, init containers first) to its end and
// returns its terminated status.
func (r *PodRun) runContainer(ctx context.Context, c corev1.Container, idx int) (corev1.ContainerStatus, error) {
	if len(c.Command) == 0 {
		return corev1.ContainerStatus{}, fmt.Errorf("pod %s container %s has no command (image entrypoints are unknown here)", r.pod.Name, c.Name)
	}
	ctrDir := filepath.Join(r.dir, "containers", strconv.Itoa(idx)+"-"+c.Name)
	mounts, home, termLog, err := r.mounts(c, ctrDir)
	if err != nil {
		return corev1.ContainerStatus{}, err
	}
	env, err := r.h.containerEnv(ctx, r.pod, c)
	if err != nil {
		return corev1.ContainerStatus{}, err
	}
	env = append([]string{"PATH=" + r.h.Assets + ":" + stdPath, "HOME=" + home, "KUBECONFIG=" + r.kube}, env...)

	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", mountScript(mounts), "sh"}, append(append([]string{}, c.Command...), c.Args...)...)...)
	cmd.Env = env
	cmd.Dir = "/"
	if c.WorkingDir != "" {
		cmd.Dir = c.WorkingDir
	}
	cmd.SysProcAttr = containerProcAttr()
	buf := &harnessutil.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = buf, buf
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = stopGrace
	r.h.mu.Lock()
	r.h.logs["pod "+r.pod.Name+" "+c.Name] = buf
	r.h.mu.Unlock()

	started := metav1.Now()
	if err := cmd.Start(); err != nil {
		return corev1.ContainerStatus{}, fmt.Errorf("starting pod %s container %s: %w", r.pod.Name, c.Name, err)
	}
	r.mu.Lock()
	r.running[c.Name] = cmd.Process.Pid
	r.mu.Unlock()
	waitErr := cmd.Wait()
	r.mu.Lock()
	delete(r.running, c.Name)
	r.mu.Unlock()

	code := int32(cmd.ProcessState.ExitCode())
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int32(ws.Signal())
	} else if code < 0 {
		return corev1.ContainerStatus{}, fmt.Errorf("pod %s container %s: %w", r.pod.Name, c.Name, waitErr)
	}
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	msg, _ := os.ReadFile(termLog)
	if len(msg) > 4096 { // the kubelet's limit
		msg = msg[:4096]
	}
	s := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image, Started: ptrTo(false),
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, Reason: reason, Message: string(msg), StartedAt: started, FinishedAt: metav1.Now()}}}
	return s, nil
}

// mounts lays out the container's bind mounts and returns them, its $HOME and its termination
// message file.
func (r *PodRun) mounts(c corev1.Container, ctrDir string) ([]mount, string, string, error) {
	vols := map[string]corev1.Volume{}
	for _, v := range r.pod.Spec.Volumes {
		vols[v.Name] = v
	}
	var ms []mount
	tmpMounted := false
	for _, vm := range c.VolumeMounts {
		v, ok := vols[vm.Name]
		if !ok || v.EmptyDir == nil {
			continue // not emptyDir (the ServiceAccount token): the kubeconfig stands in for it
		}
		src := filepath.Join(r.dir, "volumes", vm.Name, vm.SubPath)
		if err := os.MkdirAll(src, 0o777); err != nil {
			return nil, "", "", err
		}
		ms = append(ms, mount{src: src, dst: vm.MountPath, ro: vm.ReadOnly})
		tmpMounted = tmpMounted || filepath.Clean(vm.MountPath) == "/tmp"
	}
	home := filepath.Join(ctrDir, "home")
	for _, d := range []string{home, filepath.Join(ctrDir, "tmp")} {
		if err := os.MkdirAll(d, 0o777); err != nil {
			return nil, "", "", err
		}
	}
	if !tmpMounted {
		ms = append(ms, mount{src: filepath.Join(ctrDir, "tmp"), dst: "/tmp"})
	}
	if sc := c.SecurityContext; sc != nil && sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem {
		ms = append(ms, mount{src: home, dst: home, ro: true})
	}
	termLog := filepath.Join(ctrDir, "termination-log")
	if err := os.WriteFile(termLog, nil, 0o666); err != nil {
		return nil, "", "", err
	}
	tp := c.TerminationMessagePath
	if tp == "" {
		tp = corev1.TerminationMessagePathDefault
	}
	ms = append(ms, mount{src: termLog, dst: tp, file: true})
	// Parents before children: /var/run/argo before /var/run/argo/x.
	sort.SliceStable(ms, func(i, j int) bool { return strings.Count(ms[i].dst, "/") < strings.Count(ms[j].dst, "/") })
	return ms, home, termLog, nil
}

// mountScript makes the bind mounts in the (new, private) mount namespace the shell runs in,
// then execs the container's command ("$@"): its pid is the container's.
func mountScript(ms []mount) string {
	var b strings.Builder
	b.WriteString("set -e\n")
	for _, m := range ms {
		dst, src := shellQuote(m.dst), shellQuote(m.src)
		if m.file {
			fmt.Fprintf(&b, "[ -e %[1]s ] || { mkdir -p \"$(dirname %[1]s)\"; : > %[1]s; }\n", dst)
		} else {
			fmt.Fprintf(&b, "mkdir -p %s\n", dst)
		}
		fmt.Fprintf(&b, "mount --bind %s %s\n", src, dst)
		if m.ro {
			fmt.Fprintf(&b, "mount -o remount,bind,ro %s\n", dst)
		}
	}
	b.WriteString("exec \"$@\"\n")
	return b.String()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// containerEnv is c's env with the downward API and ConfigMap/Secret references resolved.
func (h *Harness) containerEnv(ctx context.Context, pod *corev1.Pod, c corev1.Container) ([]string, error) {
	if len(c.EnvFrom) > 0 {
		return nil, fmt.Errorf("pod %s container %s: envFrom is not supported here", pod.Name, c.Name)
	}
	env := make([]string, 0, len(c.Env))
	for _, e := range c.Env {
		v := e.Value
		if f := e.ValueFrom; f != nil {
			var err error
			switch {
			case f.FieldRef != nil:
				v, err = fieldValue(pod, f.FieldRef.FieldPath)
			case f.ConfigMapKeyRef != nil:
				cm := &corev1.ConfigMap{}
				err = h.Client.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: f.ConfigMapKeyRef.Name}, cm)
				v = cm.Data[f.ConfigMapKeyRef.Key]
			case f.SecretKeyRef != nil:
				s := &corev1.Secret{}
				err = h.Client.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: f.SecretKeyRef.Name}, s)
				v = string(s.Data[f.SecretKeyRef.Key])
			default:
				err = errors.New("unsupported valueFrom")
			}
			if err != nil {
				return nil, fmt.Errorf("pod %s container %s env %s: %w", pod.Name, c.Name, e.Name, err)
			}
		}
		env = append(env, e.Name+"="+v)
	}
	return env, nil
}

// fieldValue resolves a downward API field path.
func fieldValue(pod *corev1.Pod, path string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "status.podIP", "status.hostIP":
		return "127.0.0.1", nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": pod.Labels, "metadata.annotations": pod.Annotations} {
		if k, ok := strings.CutPrefix(path, prefix+"['"); ok {
			return m[strings.TrimSuffix(k, "']")], nil
		}
	}
	return "", fmt.Errorf("unsupported field path %q", path)
}

// PodRunner runs the pods of one workflow as the controller creates them.
type PodRunner struct {
	h      *Harness
	wf     string
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	runs    map[types.UID]*PodRun
	cancels map[types.UID]context.CancelFunc
	errs    []error
}

// RunPods runs every pod of workflow wfName but its agent pod (RunAgent runs that) with RunPod as
// the controller creates it, until Stop. A deleted pod's containers get SIGTERM.
func (h *Harness) RunPods(ctx context.Context, wfName string) *PodRunner {
	ctx, cancel := context.WithCancel(ctx)
	p := &PodRunner{h: h, wf: wfName, cancel: cancel, done: make(chan struct{}),
		runs: map[types.UID]*PodRun{}, cancels: map[types.UID]context.CancelFunc{}}
	go p.loop(ctx)
	return p
}

func (p *PodRunner) selector() (labels.Selector, error) {
	wf, err := labels.NewRequirement(labelWorkflow, selection.Equals, []string{p.wf})
	if err != nil {
		return nil, err
	}
	notAgent, err := labels.NewRequirement(labelComponent, selection.NotEquals, []string{"agent"})
	if err != nil {
		return nil, err
	}
	return labels.NewSelector().Add(*wf, *notAgent), nil
}

// loop lists, then watches from the list, again whenever the watch ends.
func (p *PodRunner) loop(ctx context.Context) {
	defer close(p.done)
	sel, err := p.selector()
	if err != nil {
		p.fail(err)
		return
	}
	for ctx.Err() == nil {
		l := &corev1.PodList{}
		if err := p.h.watcher.List(ctx, l, client.InNamespace(Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			if ctx.Err() == nil {
				p.fail(fmt.Errorf("listing the pods of workflow %s: %w", p.wf, err))
			}
			return
		}
		for i := range l.Items {
			p.start(ctx, &l.Items[i])
		}
		w, err := p.h.watcher.Watch(ctx, &corev1.PodList{}, client.InNamespace(Namespace), client.MatchingLabelsSelector{Selector: sel},
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: l.ResourceVersion}})
		if err != nil {
			if ctx.Err() == nil {
				p.fail(fmt.Errorf("watching the pods of workflow %s: %w", p.wf, err))
			}
			return
		}
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue // a watch error: list again
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				if pod.DeletionTimestamp.IsZero() {
					p.start(ctx, pod)
				} else {
					p.stop(pod.UID)
				}
			case watch.Deleted:
				p.stop(pod.UID)
			}
		}
		w.Stop()
	}
}

// start runs pod once, unless it has already ended.
func (p *PodRunner) start(ctx context.Context, pod *corev1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, seen := p.runs[pod.UID]; seen || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return
	}
	podCtx, cancel := context.WithCancel(ctx)
	r, err := p.h.RunPod(podCtx, pod)
	if err != nil {
		cancel()
		p.errs = append(p.errs, err)
		return
	}
	p.runs[pod.UID], p.cancels[pod.UID] = r, cancel
}

func (p *PodRunner) stop(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.cancels[uid]; c != nil {
		c()
	}
}

func (p *PodRunner) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs = append(p.errs, err)
}

// Runs are the pods started so far.
func (p *PodRunner) Runs() []*PodRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	runs := make([]*PodRun, 0, len(p.runs))
	for _, r := range p.runs {
		runs = append(runs, r)
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].Name < runs[j].Name })
	return runs
}

// Stop ends the watch and every pod still running (SIGTERM, then SIGKILL after a grace period),
// waits for them, and returns what went wrong starting or running any pod.
func (p *PodRunner) Stop() error {
	p.cancel()
	<-p.done
	var errs []error
	for _, r := range p.Runs() {
		<-r.Done()
		if _, err := r.Result(); err != nil {
			errs = append(errs, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return errors.Join(append(errs, p.errs...)...)
}

// withDescendants is pids and every live descendant of theirs, from /proc.
func withDescendants(pids []int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(fields[1]); err == nil {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var all []int
	queue := append([]int{}, pids...)
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		all = append(all, pid)
		queue = append(queue, children[pid]...)
	}
	return all
}

// AgentPID is the process id of the agent's main container (`argoexec agent main`) of workflow
// wfName, once RunAgent started it; 0 before.
func (h *Harness) AgentPID(wfName string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pids["agent "+wfName]
}
