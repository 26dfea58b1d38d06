package realstack

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/internal/compat"
)

// Each Trainer release runs here as its own manifests run it; what differs between them:
//
//   - v2.1 and later read a Configuration file (manifests/base/manager/controller_manager_config.yaml)
//     whose certManagement can be turned off, so the harness hands the manager the stack's
//     certificate for 127.0.0.1 and points the webhook configurations at it.
//   - v2.0.x has no Configuration file: its manager takes flags and always manages its own webhook
//     certificate with cert-controller, for the Service DNS name
//     kubeflow-trainer-controller-manager.<operator namespace>.svc: it writes it into the Secret
//     kubeflow-trainer-webhook-cert, patches its CA into validator.trainer.kubeflow.org, and waits
//     for the kubelet to project the Secret into the fixed /tmp/k8s-webhook-server/serving-certs.
//     The harness lets it: the manager runs in a mount namespace of its own where that directory
//     is the stack's, the harness projects the Secret there as the kubelet would, the webhook
//     configuration calls the Service name, and the apiserver runs in a mount namespace whose
//     /etc/hosts resolves the name to 127.0.0.1.
//   - Only v2.2 and later have a status server (statusServer in the Configuration file).
//
// The Configuration file's presence in the assets, copied from the release's module by
// hack/build-realstack.sh, is what says which way the release runs.

// TrainerServiceHost is the webhook Service DNS name a v2.0 manager's certificate is for.
const TrainerServiceHost = trainerSA + "." + TrainerNamespace + ".svc"

// Release reads the Trainer and JobSet releases of a real-stack assets directory, as
// hack/build-realstack.sh recorded them.
func Release(assets string) (trainer, jobset string, err error) {
	read := func(name string) (string, error) {
		data, err := os.ReadFile(filepath.Join(assets, "manifests", name, "version"))
		if err != nil {
			return "", fmt.Errorf("reading the %s release of the real stack: %w; run `make test-assets` to rebuild %s", name, err, assets)
		}
		return strings.TrimSpace(string(data)), nil
	}
	if trainer, err = read("trainer"); err != nil {
		return "", "", err
	}
	jobset, err = read("jobset")
	return trainer, jobset, err
}

// trainerTakesFlags is true for a release whose manager has no Configuration file (v2.0.x).
func trainerTakesFlags(assets string) (bool, error) {
	_, err := os.Stat(filepath.Join(assets, "manifests", "trainer", "controller_manager_config.yaml"))
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	return false, err
}

// inMountNamespace returns the command that runs binary with args in a mount namespace of its
// own (unshare) where each binds[i][0] is bind-mounted on binds[i][1]: a fixed path the binary
// reads or writes, private to this process, so nothing on this machine changes but empty mount
// points, and stacks started in parallel keep their own.
func inMountNamespace(why string, binds [][2]string, binary string, args []string) (string, []string, error) {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return "", nil, fmt.Errorf("%s runs in a mount namespace of its own: %w; install util-linux", why, err)
	}
	var script strings.Builder
	for _, b := range binds {
		if err := ensureMountPoint(b[0], b[1]); err != nil {
			return "", nil, err
		}
		fmt.Fprintf(&script, "mount --bind %q %q && ", b[0], b[1])
	}
	script.WriteString(`exec "$@"`)
	return unshare, append([]string{"--mount", "--propagation", "private", "sh", "-ec", script.String(), "realstack", binary}, args...), nil
}

// ensureMountPoint makes dst exist as the kind of src (a directory or a file).
func ensureMountPoint(src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	if fi.IsDir() {
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return fmt.Errorf("making the mount point %s: %w", dst, err)
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("making the mount point %s: %w", dst, err)
	}
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("making the mount point %s: %w", dst, err)
	}
	return f.Close()
}

// apiServerHosts returns an /etc/hosts for the apiserver where TrainerServiceHost is 127.0.0.1,
// so it can call a v2.0 manager's webhook by the name its certificate is for.
func (s *Stack) apiServerHosts() (string, error) {
	hosts := filepath.Join(s.dir, "apiserver-hosts")
	content := "127.0.0.1 localhost\n::1 localhost\n127.0.0.1 " + TrainerServiceHost + "\n"
	if err := os.WriteFile(hosts, []byte(content), 0o644); err != nil {
		return "", err
	}
	return hosts, nil
}

// startFlagsTrainer starts a v2.0 manager the way its manifests do: flags, the webhook Secret
// cert-controller fills, and the webhook configuration calling the Service DNS name.
func (s *Stack) startFlagsTrainer(ctx context.Context, m, name string, webhookPort, healthPort int) error {
	if err := s.createTrainerNamespace(ctx); err != nil {
		return err
	}
	// The manager overlay's secretGenerator makes it empty; cert-controller fills it.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: TrainerNamespace, Name: webhookSecret}}
	if err := s.Client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Secret %s/%s: %w", TrainerNamespace, webhookSecret, err)
	}
	if err := s.installWebhooks(ctx, filepath.Join(m, "webhooks.yaml"), fmt.Sprintf("https://%s:%d", TrainerServiceHost, webhookPort), nil,
		trainerWebhookName); err != nil {
		return err
	}
	// The manager reads its namespace from its pod's ServiceAccount, here as in a cluster.
	secrets, certs, err := s.trainerPodFiles(name, map[string]string{"namespace": TrainerNamespace})
	if err != nil {
		return err
	}
	binary, args, err := inMountNamespace("the Trainer v2.0 manager", [][2]string{
		{secrets, "/var/run/secrets"},
		{certs, "/tmp/k8s-webhook-server/serving-certs"},
	}, filepath.Join(s.Assets, "trainer-controller-manager"), []string{
		fmt.Sprintf("--webhook-server-port=%d", webhookPort),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", healthPort),
		"--metrics-bind-address=0",
		"--leader-elect=false",
	})
	if err != nil {
		return err
	}
	// TMPDIR=/tmp: the webhook server reads its certificate under os.TempDir(), where
	// cert-controller writes it under /tmp, as in the release's pod.
	p, err := s.start(name, binary, []string{"KUBECONFIG=" + s.Kubeconfig, "TMPDIR=/tmp"}, args...)
	if err != nil {
		return err
	}
	// cert-controller writes the certificate into the Secret, not to disk: in a cluster the
	// kubelet projects the Secret volume into the pod and the manager waits for the files. The
	// harness plays that kubelet.
	if err := waitFor(ctx, p, "cert-controller to fill Secret "+TrainerNamespace+"/"+webhookSecret, func(ctx context.Context) (bool, error) {
		return s.projectSecret(ctx, webhookSecret, certs)
	}); err != nil {
		return err
	}
	// Its /readyz waits for the certificate, the CA injected and the webhook server.
	return waitReadyz(ctx, p, healthPort)
}

// createTrainerNamespace makes the Trainer's operator namespace, if it is not there yet.
func (s *Stack) createTrainerNamespace(ctx context.Context) error {
	if err := s.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: TrainerNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", TrainerNamespace, err)
	}
	return nil
}

// trainerPodFiles makes the files a Trainer manager reads from fixed paths of its pod, under
// <stack>/<name>-root: secrets (for /var/run/secrets) holding serviceAccount's files in
// kubernetes.io/serviceaccount, and an empty serving-certs directory (for
// /tmp/k8s-webhook-server/serving-certs).
func (s *Stack) trainerPodFiles(name string, serviceAccount map[string]string) (secrets, certs string, err error) {
	root := filepath.Join(s.dir, name+"-root")
	secrets, certs = filepath.Join(root, "secrets"), filepath.Join(root, "serving-certs")
	saDir := filepath.Join(secrets, "kubernetes.io", "serviceaccount")
	for _, d := range []string{saDir, certs} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", "", err
		}
	}
	for file, data := range serviceAccount {
		if err := os.WriteFile(filepath.Join(saDir, file), []byte(data), 0o600); err != nil {
			return "", "", err
		}
	}
	return secrets, certs, nil
}

// projectSecret writes the keys of Secret name in the operator namespace as files in dir, as a
// kubelet's secret volume does, once it has a certificate and key.
func (s *Stack) projectSecret(ctx context.Context, name, dir string) (bool, error) {
	secret := &corev1.Secret{}
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: TrainerNamespace, Name: name}, secret); err != nil {
		return false, err
	}
	if len(secret.Data["tls.crt"]) == 0 || len(secret.Data["tls.key"]) == 0 {
		return false, fmt.Errorf("secret %s has no tls.crt and tls.key yet", name)
	}
	for k, v := range secret.Data {
		// Written and renamed, so the manager never reads half a file.
		tmp := filepath.Join(dir, "."+k)
		if err := os.WriteFile(tmp, v, 0o600); err != nil {
			return false, err
		}
		if err := os.Rename(tmp, filepath.Join(dir, k)); err != nil {
			return false, err
		}
	}
	return true, nil
}

// Lacks records, for the compatibility table, what the stack's release cannot do and what
// trainstep does instead; the test goes on to prove the latter.
func Lacks(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Logf(compat.NotePrefix+format, args...)
}
