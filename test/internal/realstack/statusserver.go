package realstack

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options say what a stack runs beyond the default.
type Options struct {
	// TrainJobStatus turns on the Trainer's TrainJobStatus feature gate (alpha, off by default
	// in v2.2 and v2.3) the way its docs say, featureGates in the manager's config: the Trainer
	// then injects KUBEFLOW_TRAINER_SERVER_URL, _CA_CERT and _TOKEN into every trainer container
	// and runs its status server, which writes status.trainerStatus from what a pod posts.
	TrainJobStatus bool
	// ServedPods are more "<namespace>/<name>" prefixes of served pods (served.go), for a suite
	// whose engine works in a fixed namespace: "argo/train-dag-" serves the pods of the Argo
	// example's workflows (and of their TrainJobs, named after the workflow's nodes).
	ServedPods []string
}

// What the Trainer's status server is, as the module's manager config names it.
const (
	// TrainerNamespace is the operator namespace: the Trainer reads it from its pod's
	// ServiceAccount namespace file, here as in a cluster.
	TrainerNamespace = "kubeflow-system"
	trainerSA        = "kubeflow-trainer-controller-manager"
	// StatusServerHost is the host of the URL the Trainer injects: certManagement's
	// webhookServiceName in the operator namespace. Nothing resolves it here; a pod's client
	// dials 127.0.0.1 with it as the TLS server name (PodReporter).
	StatusServerHost = "kubeflow-trainer-controller-manager." + TrainerNamespace + ".svc"
	webhookSecret    = "kubeflow-trainer-webhook-cert"
)

// issuer is the apiserver's service-account issuer. The status server verifies a pod's token
// by OIDC discovery of the issuer found in its own ServiceAccount token, so with the gate on the
// issuer must be a URL the Trainer reaches: the apiserver itself.
func (o Options) issuer(apiPort int) string {
	if o.TrainJobStatus {
		return fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	}
	return "https://kubernetes.default.svc"
}

// statusServerSetUp prepares what the Trainer's status server reads from fixed paths of its pod
// and returns the command that starts the manager with them. The Trainer v2.3.0 reads its
// ServiceAccount token and namespace from /var/run/secrets/kubernetes.io/serviceaccount and the
// status server's certificate from /tmp/k8s-webhook-server/serving-certs, hard-coded: the
// manager runs in a mount namespace of its own (unshare) where the stack's files are bind-mounted
// there, so nothing on this machine changes but two empty mount points, and stacks started in
// parallel keep their own. The plugin copies the CA from the webhook Secret in the operator
// namespace into each TrainJob's <name>-tls-config ConfigMap, so the Secret holds the stack's CA.
func (s *Stack) statusServerSetUp(ctx context.Context, port int, binary string, args []string) (string, []string, error) {
	if err := s.createTrainerNamespace(ctx); err != nil {
		return "", nil, err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: TrainerNamespace, Name: trainerSA}}
	if err := s.Client.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", nil, fmt.Errorf("creating ServiceAccount %s/%s: %w", TrainerNamespace, trainerSA, err)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 60 * 60)}}
	if err := s.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", nil, fmt.Errorf("requesting the Trainer's ServiceAccount token: %w", err)
	}
	secrets, certs, err := s.trainerPodFiles("trainer", map[string]string{"token": tr.Status.Token, "namespace": TrainerNamespace, "ca.crt": string(s.pki.caPEM)})
	if err != nil {
		return "", nil, err
	}
	kp := keyPair{cert: filepath.Join(certs, "tls.crt"), key: filepath.Join(certs, "tls.key")}
	if err := s.pki.issueNames(kp, StatusServerHost); err != nil {
		return "", nil, err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: TrainerNamespace, Name: webhookSecret}, Data: map[string][]byte{"ca.crt": s.pki.caPEM}}
	if err := s.Client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", nil, fmt.Errorf("creating Secret %s/%s: %w", TrainerNamespace, webhookSecret, err)
	}
	return inMountNamespace("the status server's manager", [][2]string{
		{secrets, "/var/run/secrets"},
		{certs, "/tmp/k8s-webhook-server/serving-certs"},
	}, binary, args)
}

// issueNames writes a serving certificate for 127.0.0.1 and dnsNames.
func (p *pki) issueNames(kp keyPair, dnsNames ...string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serialNumber, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serialNumber,
		Subject:      pkix.Name{CommonName: dnsNames[0]},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     dnsNames,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		return fmt.Errorf("issuing the status server's certificate: %w", err)
	}
	return writeKeyPair(kp, der, key)
}

// statusServerOK is true once the status server answers TLS under its Service name.
func (s *Stack) statusServerOK(port int) func(context.Context) (bool, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.pki.caPEM)
	return func(ctx context.Context) (bool, error) {
		d := tls.Dialer{Config: &tls.Config{RootCAs: pool, ServerName: StatusServerHost, MinVersion: tls.VersionTLS12}}
		c, err := d.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return false, err
		}
		c.Close()
		return true, nil
	}
}

// The env the Trainer's TrainJobStatus plugin injects into every trainer container.
const (
	EnvStatusURL    = "KUBEFLOW_TRAINER_SERVER_URL"
	EnvStatusCACert = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
	EnvStatusToken  = "KUBEFLOW_TRAINER_SERVER_TOKEN"
)

// PodReporter is what a trainer process of a pod has to report progress with: the URL the
// Trainer injected, and the CA and token files its env names, as the kubelet fills them in.
type PodReporter struct {
	URL   string
	CA    []byte
	Token string
}

// PodReporter reads the trainer container (node) of pod as the Trainer made it and resolves the
// files its status env names the way the kubelet would: the projected volume's ConfigMap item
// for the CA, and for the token a TokenRequest for the pod's ServiceAccount with the projection's
// audience and expiry, bound to the pod. An error says what is missing (the gate is off, say).
func (s *Stack) PodReporter(ctx context.Context, pod *corev1.Pod) (*PodReporter, error) {
	var c *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == "node" {
			c = &pod.Spec.Containers[i]
		}
	}
	if c == nil {
		return nil, fmt.Errorf("pod %s has no trainer container node", pod.Name)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	for _, n := range []string{EnvStatusURL, EnvStatusCACert, EnvStatusToken} {
		if env[n] == "" {
			return nil, fmt.Errorf("pod %s: the Trainer injected no %s into container node", pod.Name, n)
		}
	}
	r := &PodReporter{URL: env[EnvStatusURL]}
	ca, err := s.podFile(ctx, pod, c, env[EnvStatusCACert])
	if err != nil {
		return nil, err
	}
	r.CA = []byte(ca)
	if r.Token, err = s.podFile(ctx, pod, c, env[EnvStatusToken]); err != nil {
		return nil, err
	}
	return r, nil
}

// podFile is the content of path in container c, from the projected volume mounted over it.
func (s *Stack) podFile(ctx context.Context, pod *corev1.Pod, c *corev1.Container, path string) (string, error) {
	var mount *corev1.VolumeMount
	for i := range c.VolumeMounts {
		m := &c.VolumeMounts[i]
		if strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/") && (mount == nil || len(m.MountPath) > len(mount.MountPath)) {
			mount = m
		}
	}
	if mount == nil {
		return "", fmt.Errorf("pod %s: no volume is mounted at %s", pod.Name, path)
	}
	rel := strings.TrimPrefix(path, strings.TrimSuffix(mount.MountPath, "/")+"/")
	for _, v := range pod.Spec.Volumes {
		if v.Name != mount.Name || v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if t := src.ServiceAccountToken; t != nil && t.Path == rel {
				return s.podToken(ctx, pod, t)
			}
			if cm := src.ConfigMap; cm != nil {
				for _, item := range cm.Items {
					if item.Path == rel {
						obj := &corev1.ConfigMap{}
						if err := s.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: cm.Name}, obj); err != nil {
							return "", fmt.Errorf("pod %s: reading ConfigMap %s for %s: %w", pod.Name, cm.Name, path, err)
						}
						return obj.Data[item.Key], nil
					}
				}
			}
		}
	}
	return "", fmt.Errorf("pod %s: volume %s projects nothing at %s", pod.Name, mount.Name, path)
}

func (s *Stack) podToken(ctx context.Context, pod *corev1.Pod, t *corev1.ServiceAccountTokenProjection) (string, error) {
	name := pod.Spec.ServiceAccountName
	if name == "" {
		name = "default"
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: name}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:         []string{t.Audience},
		ExpirationSeconds: t.ExpirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if err := s.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("pod %s: requesting its projected token (audience %s): %w", pod.Name, t.Audience, err)
	}
	return tr.Status.Token, nil
}

// Report posts progress and metrics as the Kubeflow SDK's update_trainjob_status does: a
// trainerStatus with progressPercentage, estimatedRemainingSeconds (both optional), metrics as
// name/value strings and lastUpdatedTime, with the bearer token, verified against the CA. It
// fails unless the status server answers 200.
func (r *PodReporter) Report(ctx context.Context, progress, remaining *int32, metrics ...[2]string) error {
	ts := map[string]any{"lastUpdatedTime": time.Now().UTC().Format(time.RFC3339)}
	if progress != nil {
		ts["progressPercentage"] = *progress
	}
	if remaining != nil {
		ts["estimatedRemainingSeconds"] = *remaining
	}
	ms := []map[string]string{}
	for _, m := range metrics {
		ms = append(ms, map[string]string{"name": m[0], "value": m[1]})
	}
	if len(ms) > 0 {
		ts["metrics"] = ms
	}
	code, body, err := r.Post(ctx, map[string]any{"trainerStatus": ts})
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("the status server answered %d: %s", code, body)
	}
	return nil
}

// Post sends body as JSON to the URL, the way a pod does, except that it dials 127.0.0.1 at the
// URL's port: the Service name resolves nowhere here, so it is the TLS server name only.
func (r *PodReporter) Post(ctx context.Context, body any) (int, string, error) {
	u, err := url.Parse(r.URL)
	if err != nil {
		return 0, "", fmt.Errorf("the injected %s %q: %w", EnvStatusURL, r.URL, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(r.CA) {
		return 0, "", fmt.Errorf("the CA file the Trainer projected holds no certificate")
	}
	var d net.Dialer
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: u.Hostname(), MinVersion: tls.VersionTLS12},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", u.Port()))
		},
	}
	defer tr.CloseIdleConnections()
	b, err := json.Marshal(body)
	if err != nil {
		return 0, "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, bytes.NewReader(b))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+r.Token)
	resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("posting to the status server: %w", err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out), nil
}

// ReleaseAnnotation lets a held pod (env KWOK_HOLD=1) complete: stages/pod-release.yaml.
const ReleaseAnnotation = "realstack.trainstep.dev/release"

// Release lets every held pod of namespace whose name starts with prefix complete.
func (s *Stack) Release(ctx context.Context, namespace, prefix string) error {
	pods := &corev1.PodList{}
	if err := s.Client.List(ctx, pods, client.InNamespace(namespace)); err != nil {
		return err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !strings.HasPrefix(p.Name, prefix) || p.Annotations[ReleaseAnnotation] != "" {
			continue
		}
		orig := p.DeepCopy()
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[ReleaseAnnotation] = "done"
		if err := s.Client.Patch(ctx, p, client.MergeFrom(orig)); err != nil {
			return fmt.Errorf("releasing pod %s: %w", p.Name, err)
		}
	}
	return nil
}

// Rank0 waits for the running node-0 pod of TrainJob ns/name (of any TrainJob of ns when name
// is empty) and returns its reporter: what rank 0 of a training has to post its progress with.
func (s *Stack) Rank0(t testing.TB, ns, name string) *PodReporter {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), StartTimeout)
	defer cancel()
	var pod *corev1.Pod
	err := wait.PollUntilContextCancel(ctx, Interval, true, func(ctx context.Context) (bool, error) {
		pods := &corev1.PodList{}
		labels := client.MatchingLabels{"jobset.sigs.k8s.io/replicatedjob-name": "node", "batch.kubernetes.io/job-completion-index": "0"}
		if name != "" {
			labels["jobset.sigs.k8s.io/jobset-name"] = name
		}
		if err := s.Client.List(ctx, pods, client.InNamespace(ns), labels); err != nil {
			return false, nil //nolint:nilerr // an apiserver hiccup: look again
		}
		for i := range pods.Items {
			if pods.Items[i].Status.Phase == corev1.PodRunning {
				pod = &pods.Items[i]
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("waiting for a running node-0 pod in %s: %v", ns, err)
	}
	r, err := s.PodReporter(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// ReportOnceEach follows the TrainJobs a step makes one after another (list lists them: the
// step's, however a face finds them) until n have appeared, and has each one's rank 0 report
// progress once, (37+i)%, then nothing: each hangs after the step's hangTimeout. The names, in
// the order they appeared.
func (s *Stack) ReportOnceEach(t testing.TB, ns string, list func() []string, n int) []string {
	t.Helper()
	var names []string
	seen := map[string]bool{}
	for i := range n {
		ctx, cancel := context.WithTimeout(t.Context(), StartTimeout)
		var name string
		err := wait.PollUntilContextCancel(ctx, Interval, true, func(context.Context) (bool, error) {
			for _, got := range list() {
				if !seen[got] {
					name = got
					return true, nil
				}
			}
			return false, nil
		})
		cancel()
		if err != nil {
			t.Fatalf("waiting for TrainJob %d of the step in %s (seen %v): %v", i+1, ns, names, err)
		}
		seen[name] = true
		names = append(names, name)
		if err := s.Rank0(t, ns, name).Report(t.Context(), ptr.To(int32(37+i)), nil); err != nil {
			t.Fatalf("reporting progress for TrainJob %s/%s: %v", ns, name, err)
		}
	}
	return names
}
