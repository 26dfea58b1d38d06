package image_test

// What a kubelet does to start a container of this image, done here with no kubelet: the image's
// filesystem unpacked as the container's root (chroot), its own mount and PID namespaces (the
// kernel kills what is left when the first process ends, or when the test binary dies), the user
// and group the pod's securityContext or else the image's config gives, the refusal of
// runAsNonRoot for a root or non-numeric user, the env (the container's, downward API fields
// resolved, the image's PATH, HOME from the image's /etc/passwd, KUBERNETES_SERVICE_*), $(VAR)
// expansion in args, and the ServiceAccount's token, CA and namespace where client-go's in-cluster
// config reads them. The container shares the test's network namespace (it must reach the
// apiserver on 127.0.0.1): each port the container declares or an arg binds (":7356",
// "127.0.0.1:8080") is given a free port and the arg rewritten, as a pod's own network namespace
// would keep them apart; so a manifest states every port its container binds in its args.
// readOnlyRootFilesystem is kept by ownership: every file is root's and the user is not root, so
// only /tmp (1777) is writable, and it is made read-only too.

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/trainstep/trainstep/test/internal/harnessutil"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// pod is what a container sees of the pod it runs in.
type pod struct {
	Namespace, Name, UID string
	Labels               map[string]string
	// ServiceAccount is mounted (its token, the cluster CA, the namespace) unless empty.
	ServiceAccount  string
	SecurityContext *corev1.PodSecurityContext
	// Files are written into the container's root before it starts (path → content, mode,
	// uid, gid), as volumes the pod mounts (Argo's token, e.g.).
	Files []podFile
}

type podFile struct {
	Path     string
	Data     []byte
	Mode     os.FileMode
	UID, GID int
}

// running is a started container.
type running struct {
	Log   *harnessutil.SyncBuffer
	ports map[int32]int // containerPort → the port it really listens on
	done  chan struct{}
	err   error
	// terminate sends SIGTERM, as the kubelet does to a pod being deleted.
	terminate context.CancelFunc
}

// Port is the port containerPort is served on.
func (r *running) Port(t *testing.T, containerPort int32) int {
	t.Helper()
	p, ok := r.ports[containerPort]
	require.True(t, ok, "the container declares no port %d", containerPort)
	return p
}

// unpack writes img's flattened filesystem into a new directory, with the owners and modes of
// its tar entries, and returns it.
func unpack(t *testing.T, img v1.Image) string {
	t.Helper()
	rootfs := filepath.Join(t.TempDir(), "rootfs")
	require.NoError(t, os.Mkdir(rootfs, 0o755))
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		p := filepath.Join(rootfs, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			require.NoError(t, os.MkdirAll(p, 0o755))
		case tar.TypeReg:
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			require.NoError(t, err)
			_, err = io.Copy(f, tr) //nolint:gosec // our own image, bounded by its size
			require.NoError(t, errors.Join(err, f.Close()))
		default:
			t.Fatalf("the image holds %s of tar type %c, which this unpacker does not know", h.Name, h.Typeflag)
		}
		require.NoError(t, os.Lchown(p, h.Uid, h.Gid))
		require.NoError(t, os.Chmod(p, os.FileMode(h.Mode).Perm()|modeBits(h.Mode)))
	}
	return rootfs
}

// modeBits carries the sticky, setuid and setgid bits of a tar mode into an os.FileMode.
func modeBits(m int64) os.FileMode {
	var fm os.FileMode
	if m&0o1000 != 0 {
		fm |= os.ModeSticky
	}
	if m&0o2000 != 0 {
		fm |= os.ModeSetgid
	}
	if m&0o4000 != 0 {
		fm |= os.ModeSetuid
	}
	return fm
}

// start starts container c of p from the unpacked image at rootfs, whose config is cfg, and
// stops it (SIGTERM, then SIGKILL) when the test ends.
func start(t *testing.T, rootfs string, cfg *v1.ConfigFile, p pod, c corev1.Container) *running {
	t.Helper()
	uid, gid := user(t, cfg, p.SecurityContext, c.SecurityContext)
	if c.SecurityContext != nil && ptr.Deref(c.SecurityContext.ReadOnlyRootFilesystem, false) {
		if err := os.Chmod(filepath.Join(rootfs, "tmp"), 0o755); !errors.Is(err, os.ErrNotExist) {
			require.NoError(t, err)
		}
	}
	r := &running{Log: &harnessutil.SyncBuffer{}, ports: map[int32]int{}, done: make(chan struct{})}
	bound := map[int32]bool{}
	for _, port := range c.Ports {
		bound[port.ContainerPort] = true
	}
	for _, a := range c.Args {
		if n, ok := argPort(a); ok {
			bound[n] = true
		}
	}
	free, err := harnessutil.FreePorts(len(bound))
	require.NoError(t, err)
	for port := range bound {
		r.ports[port], free = free[0], free[1:]
	}
	env := containerEnv(t, rootfs, cfg, p, c, uid)
	if p.ServiceAccount != "" {
		mountServiceAccount(t, rootfs, p)
	}
	for _, f := range p.Files {
		path := filepath.Join(rootfs, f.Path)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, f.Data, f.Mode))
		require.NoError(t, os.Chmod(path, f.Mode))
		require.NoError(t, os.Chown(path, f.UID, f.GID))
	}

	argv := append(append([]string{}, c.Command...), c.Args...)
	if len(c.Command) == 0 {
		argv = append(append([]string{}, cfg.Config.Entrypoint...), c.Args...)
		if len(c.Args) == 0 {
			argv = append(argv, cfg.Config.Cmd...)
		}
	}
	require.NotEmpty(t, argv, "neither the container nor the image has a command")
	for i := range argv {
		argv[i] = expand(argv[i], env)
		if cp, ok := argPort(argv[i]); ok {
			argv[i] = strings.TrimSuffix(argv[i], strconv.Itoa(int(cp))) + strconv.Itoa(r.ports[cp])
		}
	}
	dir := cfg.Config.WorkingDir
	if c.WorkingDir != "" {
		dir = c.WorkingDir
	}
	if dir == "" {
		dir = "/"
	}
	argv[0] = lookPath(t, rootfs, argv[0], env["PATH"])
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	r.terminate = cancel
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Path = argv[0] // a path inside the chroot: execve runs after chroot(2)
	cmd.Env = envList(env)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = r.Log, r.Log
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Chroot:       rootfs,
		Credential:   &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, //nolint:gosec // uids from a pod spec
		Unshareflags: syscall.CLONE_NEWNS,
		Cloneflags:   syscall.CLONE_NEWPID,
		Pdeathsig:    syscall.SIGKILL,
	}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	require.NoError(t, cmd.Start(), "starting %v from the image", argv)
	go func() {
		r.err = cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
		if t.Failed() {
			t.Logf("%s log:\n%s", c.Name, tail(r.Log.String(), 60))
		}
	})
	return r
}

// user is the uid and gid the container runs as: the container's securityContext, else the
// pod's, else the image's USER; refused as the kubelet refuses it under runAsNonRoot.
func user(t *testing.T, cfg *v1.ConfigFile, psc *corev1.PodSecurityContext, csc *corev1.SecurityContext) (uid, gid int) {
	t.Helper()
	var runAsUser, runAsGroup *int64
	var nonRoot bool
	if psc != nil {
		runAsUser, runAsGroup, nonRoot = psc.RunAsUser, psc.RunAsGroup, ptr.Deref(psc.RunAsNonRoot, false)
	}
	if csc != nil {
		if csc.RunAsUser != nil {
			runAsUser = csc.RunAsUser
		}
		if csc.RunAsGroup != nil {
			runAsGroup = csc.RunAsGroup
		}
		if csc.RunAsNonRoot != nil {
			nonRoot = *csc.RunAsNonRoot
		}
	}
	imgUser, imgGroup, _ := strings.Cut(cfg.Config.User, ":")
	if runAsUser != nil {
		uid = int(*runAsUser)
	} else {
		n, err := strconv.Atoi(imgUser)
		if nonRoot {
			// The kubelet: "image has non-numeric user (…), cannot verify user is non-root".
			require.NoError(t, err, "the image's user %q is not numeric: the kubelet refuses it under runAsNonRoot", cfg.Config.User)
		}
		uid = n
	}
	if nonRoot {
		require.NotZero(t, uid, "the container would run as root: the kubelet refuses it under runAsNonRoot")
	}
	switch {
	case runAsGroup != nil:
		gid = int(*runAsGroup)
	case runAsUser == nil && imgGroup != "":
		n, err := strconv.Atoi(imgGroup)
		require.NoError(t, err, "the image's group %q", imgGroup)
		gid = n
	}
	return uid, gid
}

// containerEnv is the container's environment as the kubelet and the runtime make it.
func containerEnv(t *testing.T, rootfs string, cfg *v1.ConfigFile, p pod, c corev1.Container, uid int) map[string]string {
	t.Helper()
	env := map[string]string{"HOSTNAME": p.Name, "HOME": home(t, rootfs, uid)}
	for _, kv := range cfg.Config.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	u, err := url.Parse(envCfg().Host)
	require.NoError(t, err)
	env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"] = u.Hostname(), u.Port()
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = expand(e.Value, env)
		case e.ValueFrom.FieldRef != nil:
			env[e.Name] = fieldRef(t, p, e.ValueFrom.FieldRef.FieldPath)
		default:
			t.Fatalf("env %s: only values and fieldRefs are resolved here", e.Name)
		}
	}
	return env
}

// home is uid's home in the image's /etc/passwd, "/" without an entry (as containerd does).
func home(t *testing.T, rootfs string, uid int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rootfs, "etc", "passwd"))
	if errors.Is(err, os.ErrNotExist) {
		return "/"
	}
	require.NoError(t, err)
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) >= 6 && f[2] == strconv.Itoa(uid) {
			return f[5]
		}
	}
	return "/"
}

func fieldRef(t *testing.T, p pod, path string) string {
	t.Helper()
	switch {
	case path == "metadata.namespace":
		return p.Namespace
	case path == "metadata.name":
		return p.Name
	case path == "metadata.uid":
		return p.UID
	case strings.HasPrefix(path, "metadata.labels['") && strings.HasSuffix(path, "']"):
		return p.Labels[strings.TrimSuffix(strings.TrimPrefix(path, "metadata.labels['"), "']")]
	}
	t.Fatalf("fieldRef %s is not resolved here", path)
	return ""
}

// lookPath resolves a command without a slash on the container's PATH inside its root, as the
// runtime does; it fails the test as starting the container would fail.
func lookPath(t *testing.T, rootfs, name, pathEnv string) string {
	t.Helper()
	if strings.Contains(name, "/") {
		return name
	}
	for dir := range strings.SplitSeq(pathEnv, ":") {
		p := filepath.Clean("/" + dir + "/" + name)
		if fi, err := os.Stat(filepath.Join(rootfs, p)); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	t.Fatalf("exec: %q: executable file not found in the image's $PATH (%s)", name, pathEnv)
	return ""
}

// argPort is the port an arg binds: the digits after its last colon (--addr=:7356,
// --metrics-bind-address=127.0.0.1:8080).
func argPort(a string) (int32, bool) {
	i := strings.LastIndex(a, ":")
	if i < 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(a[i+1:], 10, 32)
	if err != nil || n <= 0 || n > 65535 {
		return 0, false
	}
	return int32(n), true
}

// expand replaces $(VAR) with env's VAR, as the kubelet does in args and env values.
func expand(s string, env map[string]string) string {
	for k, v := range env {
		s = strings.ReplaceAll(s, "$("+k+")", v)
	}
	return s
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// mountServiceAccount writes what the kubelet projects for the pod's ServiceAccount: a token
// from the TokenRequest API, the cluster's CA and the namespace.
func mountServiceAccount(t *testing.T, rootfs string, p pod) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(envCfg())
	require.NoError(t, err)
	tr, err := cs.CoreV1().ServiceAccounts(p.Namespace).CreateToken(t.Context(), p.ServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	require.NoError(t, err, "a token for ServiceAccount %s/%s", p.Namespace, p.ServiceAccount)
	dir := filepath.Join(rootfs, "var", "run", "secrets", "kubernetes.io", "serviceaccount")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	ca := envCfg().CAData
	if len(ca) == 0 {
		ca, err = os.ReadFile(envCfg().CAFile)
		require.NoError(t, err)
	}
	for name, data := range map[string][]byte{"token": []byte(tr.Status.Token), "ca.crt": ca, "namespace": []byte(p.Namespace)} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
}

// waitHTTP waits until GET http://127.0.0.1:port/path answers 200, or the container exits.
func (r *running) waitHTTP(t *testing.T, port int, path string) {
	t.Helper()
	deadline := time.Now().Add(testenv.Timeout)
	u := fmt.Sprintf("http://127.0.0.1:%d%s", port, path)
	for {
		select {
		case <-r.done:
			t.Fatalf("the container exited (%v) before %s answered:\n%s", r.err, u, tail(r.Log.String(), 40))
		default:
		}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, http.NoBody)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		require.True(t, time.Now().Before(deadline), "%s never answered 200 (last: %v):\n%s", u, err, tail(r.Log.String(), 40))
		time.Sleep(100 * time.Millisecond) // polling a process's probe, as the kubelet does: nothing to wait on
	}
}

// ready waits on the container's readinessProbe (an httpGet), as the kubelet would.
func (r *running) ready(t *testing.T, c corev1.Container) {
	t.Helper()
	require.NotNil(t, c.ReadinessProbe, "%s has no readinessProbe", c.Name)
	g := c.ReadinessProbe.HTTPGet
	require.NotNil(t, g, "%s's readinessProbe is not an httpGet", c.Name)
	port := g.Port.IntValue()
	if g.Port.StrVal != "" {
		for _, p := range c.Ports {
			if p.Name == g.Port.StrVal {
				port = int(p.ContainerPort)
			}
		}
	}
	r.waitHTTP(t, r.Port(t, int32(port)), g.Path) //nolint:gosec // a port number
}

// stop ends the container as the kubelet ends a deleted pod's (SIGTERM, SIGKILL after 10 s) and
// returns its exit code.
func (r *running) stop(t *testing.T) int {
	t.Helper()
	r.terminate()
	return r.wait(t)
}

// wait waits for the container to exit and returns its exit code.
func (r *running) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(stepTimeout):
		t.Fatalf("the container did not exit:\n%s", tail(r.Log.String(), 40))
	}
	var ee *exec.ExitError
	if errors.As(r.err, &ee) {
		return ee.ExitCode()
	}
	if errors.Is(r.err, context.Canceled) {
		return 0 // exec.Cmd.Wait's word for a stopped command that exited 0
	}
	require.NoError(t, r.err)
	return 0
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
