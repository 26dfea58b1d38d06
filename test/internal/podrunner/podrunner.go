// Package podrunner is a local kubelet for tests: it runs a pod's containers as local processes
// and writes the status a kubelet would write, so the controllers that made the pod (Argo's
// workflow-controller, Tekton's, the Job controller under JobSet and the Trainer) see it run and
// end as in a cluster. test/e2e/argo runs the pods of one workflow with it (no scheduler there);
// the realstack suites run every pod of their served namespaces with it once kube-scheduler has
// bound the pod to a kwok Node (kwok then leaves those pods alone: realstack.Stack.Serves).
//
// Each container runs in a PID namespace of its own (its processes end with its first one) and a
// mount namespace of its own in which
//   - the pod's volumes are bind-mounted at their mountPaths: emptyDir (a directory of the pod),
//     persistentVolumeClaim (the bound PersistentVolume's hostPath), hostPath, and configMap,
//     secret, downwardAPI and projected volumes as files (a ServiceAccount token from the
//     TokenRequest API, bound to the pod); downward API files follow the pod's labels and
//     annotations as they change (Tekton's steps wait for the tekton.dev/ready annotation);
//   - /tmp is the container's own unless a volume is mounted there, and so is its working
//     directory when it names none (/ is the host's, shared by every pod);
//   - the termination message path is a file of the container's, read back into its status;
//   - /etc/hosts has Options.Hosts added, when there are any;
//   - the binaries an image is known to hold (Options.Images) are bind-mounted at their paths.
//
// The env is the container's own (downward API fields, ConfigMap and Secret references and
// envFrom resolved, $(VAR) references expanded, in env, command and args) on a clean base: PATH
// finds the tools of the container's image (python for a python image), then Options.Path, and
// KUBECONFIG authenticates as the pod's ServiceAccount (Options.ServiceAccountConfig). Volume
// types not listed above are not mounted. The network is the host's: a pod's IP is 127.0.0.1.
package podrunner

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/test/internal/harnessutil"
	"github.com/trainstep/trainstep/test/internal/kubeconfig"
)

// podsRoot holds the pods' directories. Not under /tmp: each container gets its own /tmp, which
// would hide the pod's directory (its kubeconfig, its volumes) from the container.
const podsRoot = "/var/tmp"

// stdPath is the PATH of a container after the image's tools and Options.Path.
const stdPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// stopGrace bounds a container's exit after SIGTERM when its pod run is cancelled.
const stopGrace = 10 * time.Second

// Options say what the runner talks to and what the images hold.
type Options struct {
	// Client is an admin client that can watch; it reads what the pods refer to and writes their
	// status.
	Client client.WithWatch
	// ServiceAccountConfig returns a config that authenticates as ServiceAccount namespace/name:
	// the pod's KUBECONFIG.
	ServiceAccountConfig func(ctx context.Context, namespace, name string) (*rest.Config, error)
	// Path are directories every container finds commands in, before the standard ones.
	Path []string
	// Images say what the images hold, where it matters: the first whose Prefix the container's
	// image starts with applies.
	Images []Image
	// Hosts are /etc/hosts entries (name → address) every container sees, as a cluster's DNS
	// would resolve Service names.
	Hosts map[string]string
}

// Image is what the containers of an image find besides the host's own commands.
type Image struct {
	// Prefix selects the images: "python:" is every python image.
	Prefix string
	// Python puts the host's python3 on PATH as python and python3.
	Python bool
	// Files are absolute paths in the image and the host files bind-mounted there
	// (/ko-app/entrypoint of Tekton's entrypoint image, say).
	Files map[string]string
	// Entrypoint is the image's ENTRYPOINT, run with the container's args when it has no command.
	Entrypoint []string
}

// Runner runs pods. Make it with New; Close removes what it wrote.
type Runner struct {
	opts      Options
	dir       string // pods' directories, and bin/ with python
	pythonBin string // a directory with python and python3, when an Image asks for them

	mu     sync.Mutex
	logs   map[string]*harnessutil.SyncBuffer // "pod <ns>/<name> <container>" → its output
	ends   map[string]string                  // the same keys → how the container ended
	order  []string
	saCfgs map[string]*rest.Config
}

// New makes a runner. When an Image asks for python it finds the host's python3 on PATH (the
// interpreter itself, not a version manager's shim, which would look for its root under the
// container's $HOME).
func New(ctx context.Context, opts Options) (*Runner, error) {
	if opts.Client == nil || opts.ServiceAccountConfig == nil {
		return nil, errors.New("podrunner: Options.Client and Options.ServiceAccountConfig are required")
	}
	dir, err := os.MkdirTemp(podsRoot, "trainstep-pods-")
	if err != nil {
		return nil, fmt.Errorf("creating the pods' directory: %w", err)
	}
	r := &Runner{opts: opts, dir: dir, logs: map[string]*harnessutil.SyncBuffer{}, ends: map[string]string{}, saCfgs: map[string]*rest.Config{}}
	for _, im := range opts.Images {
		if im.Python {
			if err := r.findPython(ctx); err != nil {
				_ = os.RemoveAll(dir)
				return nil, err
			}
			break
		}
	}
	return r, nil
}

func (r *Runner) findPython(ctx context.Context) error {
	py, err := exec.LookPath("python3")
	if err != nil {
		return fmt.Errorf("python images run the host's python3, and there is none on PATH: %w", err)
	}
	out, err := exec.CommandContext(ctx, py, "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		return fmt.Errorf("asking %s where its interpreter is: %w", py, err)
	}
	exe := strings.TrimSpace(string(out))
	r.pythonBin = filepath.Join(r.dir, "python-bin")
	if err := os.MkdirAll(r.pythonBin, 0o755); err != nil {
		return err
	}
	for _, name := range []string{"python", "python3"} {
		if err := os.Symlink(exe, filepath.Join(r.pythonBin, name)); err != nil {
			return fmt.Errorf("putting %s on the python images' PATH: %w", exe, err)
		}
	}
	return nil
}

// Close removes the pods' directories. Stop the pods first.
func (r *Runner) Close() error { return os.RemoveAll(r.dir) }

// Log is what container ctr of pod namespace/name has printed so far.
func (r *Runner) Log(namespace, name, ctr string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b := r.logs[logKey(namespace, name, ctr)]; b != nil {
		return b.String()
	}
	return ""
}

func logKey(namespace, name, ctr string) string { return "pod " + namespace + "/" + name + " " + ctr }

// DumpLogs writes the last lines of every container's output, in the order they started (for a
// failed test).
func (r *Runner) DumpLogs(w io.Writer, lines int) {
	r.mu.Lock()
	keys := append([]string{}, r.order...)
	r.mu.Unlock()
	for _, k := range keys {
		r.mu.Lock()
		s, end := r.logs[k].String(), r.ends[k]
		r.mu.Unlock()
		if end == "" {
			end = "running"
		}
		fmt.Fprintf(w, "----- %s (%s) -----\n%s\n", k, end, Tail(s, lines))
	}
}

// Tail is the last n lines of s.
func Tail(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}

// PodRun is a pod whose containers run as local processes.
type PodRun struct {
	// Name is the pod's name.
	Name string

	r    *Runner
	pod  *corev1.Pod
	dir  string
	kube string // the pod's kubeconfig, inside dir
	done chan struct{}

	mu      sync.Mutex
	running map[string]int // container name → pid, while it runs
	phase   corev1.PodPhase
	err     error
	vols    map[string]string // volume name → its directory or file on the host
	latest  *corev1.Pod       // the pod as last seen, for the downward API files
}

// Done is closed when every container has exited and the final status was written (or the run
// was cancelled).
func (p *PodRun) Done() <-chan struct{} { return p.done }

// Result is the pod's final phase and what went wrong running it (nil when the containers ran and
// their status was written, whatever their exit codes). Read it after Done.
func (p *PodRun) Result() (corev1.PodPhase, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.phase, p.err
}

// PIDs are the processes the pod holds now: each running container's process and its
// descendants (emissary's child, e.g.).
func (p *PodRun) PIDs() []int {
	p.mu.Lock()
	roots := make([]int, 0, len(p.running))
	for _, pid := range p.running {
		roots = append(roots, pid)
	}
	p.mu.Unlock()
	return withDescendants(roots)
}

// RunPod starts pod's containers as local processes (init containers one after another, then the
// containers together) and returns; the run goes on until the containers exit or ctx ends (the
// containers then get SIGTERM, as on pod deletion). The pod must be as read from the apiserver
// (its UID is in the env of Argo's containers).
func (r *Runner) RunPod(ctx context.Context, pod *corev1.Pod) (*PodRun, error) {
	dir := filepath.Join(r.dir, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cfg, err := r.serviceAccountConfig(ctx, pod.Namespace, pod.Spec.ServiceAccountName)
	if err != nil {
		return nil, err
	}
	p := &PodRun{Name: pod.Name, r: r, pod: pod.DeepCopy(), dir: dir, kube: filepath.Join(dir, "kubeconfig"),
		done: make(chan struct{}), running: map[string]int{}, latest: pod.DeepCopy()}
	if err := kubeconfig.Write(cfg, pod.Namespace, p.kube); err != nil {
		return nil, err
	}
	go p.run(ctx)
	return p, nil
}

// Update tells the run that the pod changed: downward API files follow its labels and
// annotations, as the kubelet's do.
func (p *PodRun) Update(pod *corev1.Pod) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latest = pod.DeepCopy()
	if p.vols == nil {
		return nil // not laid out yet (runContainers writes them from p.latest), or gone
	}
	return writeDownward(p.latest, p.pod.Spec.Volumes, p.vols)
}

// serviceAccountConfig is the config of ServiceAccount namespace/sa (default when empty), its
// certificate and CA inline: a file under /tmp would be hidden inside the container.
func (r *Runner) serviceAccountConfig(ctx context.Context, namespace, sa string) (*rest.Config, error) {
	if sa == "" {
		sa = "default"
	}
	key := namespace + "/" + sa
	r.mu.Lock()
	cfg := r.saCfgs[key]
	r.mu.Unlock()
	if cfg != nil {
		return cfg, nil
	}
	cfg, err := r.opts.ServiceAccountConfig(ctx, namespace, sa)
	if err != nil {
		return nil, fmt.Errorf("a config for ServiceAccount %s: %w", key, err)
	}
	if err := rest.LoadTLSFiles(cfg); err != nil {
		return nil, err
	}
	cfg.CAFile, cfg.CertFile, cfg.KeyFile = "", "", ""
	r.mu.Lock()
	r.saCfgs[key] = cfg
	r.mu.Unlock()
	return cfg, nil
}

func (p *PodRun) run(ctx context.Context) {
	defer close(p.done)
	phase, err := p.runContainers(ctx)
	p.mu.Lock()
	p.phase, p.err = phase, err
	p.vols = nil // the volumes go: an Update after the end writes nothing
	p.mu.Unlock()
	_ = os.RemoveAll(p.dir) // Argo's emptyDirs hold a copy of argoexec (150 MB) each
}

// runContainers runs the containers and writes the status at each step a kubelet reports.
func (p *PodRun) runContainers(ctx context.Context) (corev1.PodPhase, error) {
	spec := p.pod.Spec
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

	vols, err := p.volumes(ctx)
	if err != nil {
		// What the kubelet reports as FailedMount; the pod stays Pending. Say it in the status too.
		st.Message = err.Error()
		return "", errors.Join(err, p.writeStatus(ctx, st))
	}
	// Under the lock, from the pod as last seen: an Update that came meanwhile is not lost.
	p.mu.Lock()
	p.vols = vols
	err = writeDownward(p.latest, spec.Volumes, vols)
	p.mu.Unlock()
	if err != nil {
		return "", err
	}

	for i, c := range spec.InitContainers {
		st.InitContainerStatuses[i] = running(c)
		if err := p.writeStatus(ctx, st); err != nil {
			return "", err
		}
		exit, err := p.runContainer(ctx, c, i)
		if err != nil {
			return "", err
		}
		st.InitContainerStatuses[i] = exit
		if exit.State.Terminated.ExitCode != 0 {
			st.Phase = corev1.PodFailed
			return st.Phase, p.writeStatus(ctx, st)
		}
	}

	for i, c := range spec.Containers {
		st.ContainerStatuses[i] = running(c)
	}
	st.Phase = corev1.PodRunning
	setConditions(&st, true, true)
	if err := p.writeStatus(ctx, st); err != nil {
		return "", err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(spec.Containers))
	for i, c := range spec.Containers {
		wg.Go(func() {
			exit, err := p.runContainer(ctx, c, len(spec.InitContainers)+i)
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
	return st.Phase, p.writeStatus(ctx, st)
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
func (p *PodRun) writeStatus(ctx context.Context, st corev1.PodStatus) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod := &corev1.Pod{}
		if err := p.r.opts.Client.Get(ctx, client.ObjectKeyFromObject(p.pod), pod); err != nil {
			return err
		}
		pod.Status = *st.DeepCopy()
		return p.r.opts.Client.Status().Update(ctx, pod)
	})
	select {
	case <-ctx.Done():
		// Cancelled: the pod is being deleted, or the test ends; a kubelet would write no more.
		return nil
	default:
	}
	if err != nil && !apierrors.IsNotFound(err) { // deleted: nobody reads it
		return fmt.Errorf("writing the status of pod %s/%s: %w", p.pod.Namespace, p.pod.Name, err)
	}
	return nil
}

// image is what applies to the container's image; the zero Image when nothing does.
func (r *Runner) image(ref string) Image {
	for _, im := range r.opts.Images {
		if strings.HasPrefix(ref, im.Prefix) {
			return im
		}
	}
	return Image{}
}

// runContainer runs container c (the idx-th of the pod, init containers first) to its end and
// returns its terminated status.
func (p *PodRun) runContainer(ctx context.Context, c corev1.Container, idx int) (corev1.ContainerStatus, error) {
	im := p.r.image(c.Image)
	env, vars, err := p.r.containerEnv(ctx, p.pod, c)
	if err != nil {
		return corev1.ContainerStatus{}, err
	}
	argv := make([]string, 0, len(c.Command)+len(c.Args))
	for _, a := range c.Command {
		argv = append(argv, expand(a, vars))
	}
	if len(c.Command) == 0 {
		argv = append(argv, im.Entrypoint...)
	}
	for _, a := range c.Args {
		argv = append(argv, expand(a, vars))
	}
	if len(c.Command) == 0 && len(im.Entrypoint) == 0 {
		return corev1.ContainerStatus{}, fmt.Errorf("pod %s/%s container %s has no command, and the entrypoint of image %s is not known here (podrunner.Image.Entrypoint)",
			p.pod.Namespace, p.pod.Name, c.Name, c.Image)
	}
	ctrDir := filepath.Join(p.dir, "containers", strconv.Itoa(idx)+"-"+c.Name)
	mounts, home, termLog, err := p.mounts(c, im, ctrDir)
	if err != nil {
		return corev1.ContainerStatus{}, err
	}
	path := append([]string{}, p.r.opts.Path...)
	if im.Python {
		path = append([]string{p.r.pythonBin}, path...)
	}
	path = append(path, stdPath)
	env = append([]string{"PATH=" + strings.Join(path, ":"), "HOME=" + home, "KUBECONFIG=" + p.kube,
		"HOSTNAME=" + p.pod.Name}, env...)

	// A container's / is its own image's; here / is the host's, shared by every pod. So a
	// container that names no working directory starts in one of its own: the files it writes by
	// a relative path (trainstep's script writes its program so) are not another pod's.
	wd := c.WorkingDir
	if wd == "" {
		wd = filepath.Join(ctrDir, "root")
	}
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", mountScript(mounts, wd), "sh"}, argv...)...)
	cmd.Env = env
	cmd.Dir = "/"
	cmd.SysProcAttr = containerProcAttr()
	buf := &harnessutil.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = buf, buf
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = stopGrace
	key := logKey(p.pod.Namespace, p.pod.Name, c.Name)
	p.r.mu.Lock()
	if _, ok := p.r.logs[key]; !ok {
		p.r.order = append(p.r.order, key)
	}
	p.r.logs[key] = buf
	p.r.mu.Unlock()

	started := metav1.Now()
	if err := cmd.Start(); err != nil {
		return corev1.ContainerStatus{}, fmt.Errorf("starting pod %s/%s container %s: %w", p.pod.Namespace, p.pod.Name, c.Name, err)
	}
	p.mu.Lock()
	p.running[c.Name] = cmd.Process.Pid
	p.mu.Unlock()
	waitErr := cmd.Wait()
	p.mu.Lock()
	delete(p.running, c.Name)
	p.mu.Unlock()

	code := int32(cmd.ProcessState.ExitCode())
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int32(ws.Signal())
	} else if code < 0 {
		return corev1.ContainerStatus{}, fmt.Errorf("pod %s/%s container %s: %w", p.pod.Namespace, p.pod.Name, c.Name, waitErr)
	}
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	msg, _ := os.ReadFile(termLog)
	if len(msg) == 0 && code != 0 && c.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
		msg = []byte(Tail(buf.String(), 80))
	}
	if len(msg) > 4096 { // the kubelet's limit
		msg = msg[len(msg)-4096:]
	}
	p.r.mu.Lock()
	p.r.ends[key] = fmt.Sprintf("exit code %d after %s, termination message %q", code,
		time.Since(started.Time).Round(time.Millisecond), Tail(string(msg), 3))
	p.r.mu.Unlock()
	s := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image, Started: ptrTo(false),
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, Reason: reason, Message: string(msg), StartedAt: started, FinishedAt: metav1.Now()}}}
	return s, nil
}

// mount is a bind mount inside a container's mount namespace.
type mount struct {
	src, dst string
	file     bool // a file, not a directory
	ro       bool
}

// mounts lays out the container's bind mounts and returns them, its $HOME and its termination
// message file.
func (p *PodRun) mounts(c corev1.Container, im Image, ctrDir string) ([]mount, string, string, error) {
	p.mu.Lock()
	vols := p.vols
	p.mu.Unlock()
	var ms []mount
	tmpMounted := false
	for _, vm := range c.VolumeMounts {
		src, ok := vols[vm.Name]
		if !ok {
			continue // a volume type not run here
		}
		src = filepath.Join(src, vm.SubPath)
		fi, err := os.Stat(src)
		if err != nil {
			if err := os.MkdirAll(src, 0o777); err != nil {
				return nil, "", "", err
			}
		}
		ms = append(ms, mount{src: src, dst: vm.MountPath, ro: vm.ReadOnly, file: fi != nil && !fi.IsDir()})
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
	for dst, src := range im.Files {
		ms = append(ms, mount{src: src, dst: dst, file: true, ro: true})
	}
	if len(p.r.opts.Hosts) > 0 {
		hosts, err := p.r.hostsFile()
		if err != nil {
			return nil, "", "", err
		}
		ms = append(ms, mount{src: hosts, dst: "/etc/hosts", file: true, ro: true})
	}
	// Parents before children: /var/run/argo before /var/run/argo/x.
	sort.SliceStable(ms, func(i, j int) bool { return strings.Count(ms[i].dst, "/") < strings.Count(ms[j].dst, "/") })
	return ms, home, termLog, nil
}

// hostsFile is the host's /etc/hosts with Options.Hosts added, written once.
func (r *Runner) hostsFile() (string, error) {
	path := filepath.Join(r.dir, "hosts")
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	b, err := os.ReadFile("/etc/hosts")
	if err != nil {
		return "", err
	}
	names := make([]string, 0, len(r.opts.Hosts))
	for n := range r.opts.Hosts {
		names = append(names, n)
	}
	sort.Strings(names)
	s := strings.TrimRight(string(b), "\n") + "\n"
	for _, n := range names {
		s += r.opts.Hosts[n] + "\t" + n + "\n"
	}
	return path, os.WriteFile(path, []byte(s), 0o644)
}

// mountScript makes the bind mounts in the (new, private) mount namespace the shell runs in,
// changes to the working directory (after the mounts: Tekton's /workspace is a volume), then
// execs the container's command ("$@"): its pid is the container's.
func mountScript(ms []mount, workingDir string) string {
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
	if workingDir != "" {
		fmt.Fprintf(&b, "mkdir -p %[1]s\ncd %[1]s\n", shellQuote(workingDir))
	}
	b.WriteString("exec \"$@\"\n")
	return b.String()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

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
