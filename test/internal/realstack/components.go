package realstack

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// readObjects decodes every object of the (multi-document) YAML files matching pattern.
func readObjects(pattern string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(pattern)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no manifests match %s; run `make test-assets`", pattern)
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("decoding %s: %w", f, err)
			}
			if len(u.Object) > 0 {
				objs = append(objs, u)
			}
		}
	}
	return objs, nil
}

// stackCRDs are the Trainer's and JobSet's CRDs of s.Assets.
func (s *Stack) stackCRDs() []string {
	m := filepath.Join(s.Assets, "manifests")
	return []string{filepath.Join(m, "trainer", "crds", "*.yaml"), filepath.Join(m, "jobset", "crds", "*.yaml")}
}

// InstallCRDs creates the CRDs of the files matching patterns (one already there is kept) and
// waits until all are Established: an engine's own CRDs, e.g. Argo's or Tekton's.
func (s *Stack) InstallCRDs(ctx context.Context, patterns ...string) error {
	return s.putCRDs(ctx, func(ctx context.Context, o *unstructured.Unstructured) error {
		if err := s.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	}, patterns...)
}

// putCRDs puts each CRD of the files matching patterns with put, then waits until all are
// Established.
func (s *Stack) putCRDs(ctx context.Context, put func(context.Context, *unstructured.Unstructured) error, patterns ...string) error {
	var names []string
	for _, pattern := range patterns {
		objs, err := readObjects(pattern)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if err := put(ctx, o); err != nil {
				return fmt.Errorf("putting CRD %s: %w", o.GetName(), err)
			}
			names = append(names, o.GetName())
		}
	}
	return waitFor(ctx, nil, "the CRDs to be Established", func(ctx context.Context) (bool, error) {
		for _, n := range names {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := s.Client.Get(ctx, client.ObjectKey{Name: n}, crd); err != nil {
				return false, err
			}
			established := false
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					established = true
				}
			}
			if !established {
				return false, fmt.Errorf("CRD %s is not Established", n)
			}
		}
		return true, nil
	})
}

// installWebhooks creates the webhook configurations of file with each clientConfig.service
// replaced by the URL base+path and caBundle (none: a manager that manages its own certificate
// patches it in); rename maps manifest names to the names to create. One already there is
// replaced, as `kubectl apply` of a new release's manifests does.
func (s *Stack) installWebhooks(ctx context.Context, file, base string, caBundle []byte, rename func(string) string) error {
	objs, err := readObjects(file)
	if err != nil {
		return err
	}
	for _, o := range objs {
		whs, ok, err := unstructured.NestedSlice(o.Object, "webhooks")
		if err != nil {
			return fmt.Errorf("reading the webhooks of %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		if !ok {
			return fmt.Errorf("%s %s has no webhooks", o.GetKind(), o.GetName())
		}
		for i, w := range whs {
			wh := w.(map[string]any)
			path, _, _ := unstructured.NestedString(wh, "clientConfig", "service", "path")
			if path == "" {
				return fmt.Errorf("webhook %v of %s has no clientConfig.service.path", wh["name"], file)
			}
			cc := map[string]any{"url": base + path}
			if caBundle != nil {
				cc["caBundle"] = base64.StdEncoding.EncodeToString(caBundle)
			}
			wh["clientConfig"] = cc
			whs[i] = wh
		}
		if err := unstructured.SetNestedSlice(o.Object, whs, "webhooks"); err != nil {
			return err
		}
		o.SetName(rename(o.GetName()))
		if err := client.IgnoreNotFound(s.Client.Delete(ctx, o.DeepCopy())); err != nil {
			return fmt.Errorf("replacing %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		if err := s.Client.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// managerConfig reads a manager's Configuration file from the module and sets the given
// dotted paths.
func managerConfig(src, dst string, set map[string]any) error {
	cfg := map[string]any{}
	if src != "" {
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := yaml.Unmarshal(data, &cfg); err != nil {
			return fmt.Errorf("reading %s: %w", src, err)
		}
	}
	for k, v := range set {
		if err := unstructured.SetNestedField(cfg, v, strings.Split(k, ".")...); err != nil {
			return err
		}
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, out, 0o644)
}

// certTmpdir makes a TMPDIR whose k8s-webhook-server/serving-certs holds kp: controller-runtime's
// default webhook cert dir is under os.TempDir().
func (s *Stack) certTmpdir(name string, kp keyPair) (string, error) {
	tmp := filepath.Join(s.dir, name+"-tmp")
	certs := filepath.Join(tmp, "k8s-webhook-server", "serving-certs")
	if err := os.MkdirAll(certs, 0o700); err != nil {
		return "", err
	}
	for src, dst := range map[string]string{kp.cert: "tls.crt", kp.key: "tls.key"} {
		data, err := os.ReadFile(src)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(certs, dst), data, 0o600); err != nil {
			return "", err
		}
	}
	return tmp, nil
}

// startJobSet starts the JobSet manager of s.Assets under name (its log file).
func (s *Stack) startJobSet(ctx context.Context, name string, kp keyPair, webhookPort, healthPort int) error {
	m := filepath.Join(s.Assets, "manifests", "jobset")
	if err := s.installWebhooks(ctx, filepath.Join(m, "webhooks.yaml"), fmt.Sprintf("https://127.0.0.1:%d", webhookPort), s.pki.caPEM,
		func(n string) string { return "jobset-" + n }); err != nil {
		return err
	}
	cfg := filepath.Join(s.dir, name+"-config.yaml")
	if err := managerConfig(filepath.Join(m, "controller_manager_config.yaml"), cfg, map[string]any{
		"leaderElection.leaderElect":    false,
		"internalCertManagement.enable": false,
		"webhook.port":                  int64(webhookPort),
		"webhook.host":                  "127.0.0.1",
		"metrics.bindAddress":           "0",
		"health.healthProbeBindAddress": fmt.Sprintf("127.0.0.1:%d", healthPort),
	}); err != nil {
		return err
	}
	tmp, err := s.certTmpdir(name, kp)
	if err != nil {
		return err
	}
	p, err := s.start(name, filepath.Join(s.Assets, "jobset-manager"), []string{"TMPDIR=" + tmp},
		"--config="+cfg, "--kubeconfig="+s.Kubeconfig)
	if err != nil {
		return err
	}
	return s.waitManager(ctx, p, healthPort, webhookPort)
}

// trainerWebhookName is the name the Trainer's manifests give a webhook configuration (kustomize
// renames the two the module generates).
func trainerWebhookName(n string) string {
	switch n {
	case "validating-webhook-configuration":
		return "validator.trainer.kubeflow.org"
	case "mutating-webhook-configuration":
		return "defaulter.trainer.kubeflow.org"
	}
	return "trainer-" + n
}

// startTrainer starts the Trainer manager of s.Assets under name (its log file), the way its
// release runs (release.go).
func (s *Stack) startTrainer(ctx context.Context, name string, kp keyPair, webhookPort, healthPort, statusPort int, opts Options) error {
	m := filepath.Join(s.Assets, "manifests", "trainer")
	flags, err := trainerTakesFlags(s.Assets)
	if err != nil {
		return err
	}
	src := filepath.Join(m, "controller_manager_config.yaml")
	hasStatusServer := false
	if !flags {
		if hasStatusServer, err = configHas(src, "statusServer"); err != nil {
			return err
		}
	}
	if opts.TrainJobStatus && !hasStatusServer {
		return errors.New("this Trainer release has no status server (TrainJobStatus is v2.2 and later)")
	}
	if flags {
		return s.startFlagsTrainer(ctx, m, name, webhookPort, healthPort)
	}
	if err := s.installWebhooks(ctx, filepath.Join(m, "webhooks.yaml"), fmt.Sprintf("https://127.0.0.1:%d", webhookPort), s.pki.caPEM,
		trainerWebhookName); err != nil {
		return err
	}
	cfg := filepath.Join(s.dir, name+"-config.yaml")
	set := map[string]any{
		"leaderElection.leaderElect":    false,
		"certManagement.enable":         false,
		"webhook.port":                  int64(webhookPort),
		"webhook.host":                  "127.0.0.1",
		"metrics.bindAddress":           "0",
		"health.healthProbeBindAddress": fmt.Sprintf("127.0.0.1:%d", healthPort),
	}
	// The manager decodes its Configuration strictly: a field its release lacks stops it.
	if hasStatusServer {
		set["statusServer.port"] = int64(statusPort)
	}
	if opts.TrainJobStatus {
		set["featureGates.TrainJobStatus"] = true // as the Helm chart's manager.config.featureGates sets it
	}
	if err := managerConfig(src, cfg, set); err != nil {
		return err
	}
	tmp, err := s.certTmpdir(name, kp)
	if err != nil {
		return err
	}
	binary, args := filepath.Join(s.Assets, "trainer-controller-manager"), []string{"--config=" + cfg}
	if opts.TrainJobStatus {
		if binary, args, err = s.statusServerSetUp(ctx, statusPort, binary, args); err != nil {
			return err
		}
	}
	p, err := s.start(name, binary, []string{"TMPDIR=" + tmp, "KUBECONFIG=" + s.Kubeconfig}, args...)
	if err != nil {
		return err
	}
	if err := s.waitManager(ctx, p, healthPort, webhookPort); err != nil {
		return err
	}
	if opts.TrainJobStatus {
		return waitFor(ctx, p, "the Trainer's status server", s.statusServerOK(statusPort))
	}
	return nil
}

// configHas says whether the manager Configuration file src has the top-level field key.
func configHas(src, key string) (bool, error) {
	data, err := os.ReadFile(src)
	if err != nil {
		return false, err
	}
	cfg := map[string]any{}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return false, fmt.Errorf("reading %s: %w", src, err)
	}
	_, ok := cfg[key]
	return ok, nil
}

// waitManager waits until a controller-runtime manager says it is ready and its webhook server
// answers TLS with the stack's certificate.
func (s *Stack) waitManager(ctx context.Context, p *process, healthPort, webhookPort int) error {
	if err := waitReadyz(ctx, p, healthPort); err != nil {
		return err
	}
	return waitFor(ctx, p, p.name+" webhook server", s.tlsOK(webhookPort))
}

// waitReadyz waits until a controller-runtime manager's /readyz answers OK.
func waitReadyz(ctx context.Context, p *process, healthPort int) error {
	return waitFor(ctx, p, p.name+" /readyz", func(ctx context.Context) (bool, error) {
		return httpOK(ctx, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort))
	})
}

// installRuntimes creates the stock ClusterTrainingRuntimes through the Trainer's webhooks,
// retrying while they are not yet serving.
func (s *Stack) installRuntimes(ctx context.Context) error {
	objs, err := readObjects(filepath.Join(s.Assets, "manifests", "trainer", "runtimes", "*.yaml"))
	if err != nil {
		return err
	}
	var trainerProc *process
	for _, p := range s.procs {
		if strings.HasPrefix(p.name, "trainer") {
			trainerProc = p // the newest
		}
	}
	s.Runtimes = nil
	for _, o := range objs {
		if err := waitFor(ctx, trainerProc, "the Trainer webhook to admit runtime "+o.GetName(), func(ctx context.Context) (bool, error) {
			return true, s.apply(ctx, o.DeepCopy())
		}); err != nil {
			return err
		}
		s.Runtimes = append(s.Runtimes, o.GetName())
	}
	return nil
}

// apply creates o, or replaces the one there with it (keeping its resourceVersion), as
// `kubectl apply` of a release's manifests does.
func (s *Stack) apply(ctx context.Context, o *unstructured.Unstructured) error {
	err := s.Client.Create(ctx, o.DeepCopy())
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(o.GroupVersionKind())
	if err := s.Client.Get(ctx, client.ObjectKeyFromObject(o), cur); err != nil {
		return err
	}
	o.SetResourceVersion(cur.GetResourceVersion())
	return s.Client.Update(ctx, o)
}

// Namespace creates a namespace for this test alone and deletes it when the test ends; the
// namespace controller then deletes what the test left in it. It waits for the default
// ServiceAccount, without which no pod is admitted. kwok plays the kubelet of its pods
// (ServedNamespace makes one whose pods really run).
func (s *Stack) Namespace(t testing.TB) string {
	t.Helper()
	return s.namespace(t, namespacePrefix(t.Name()))
}

var notDNSLabel = regexp.MustCompile(`[^a-z0-9-]+`)

func namespacePrefix(testName string) string {
	p := strings.Trim(notDNSLabel.ReplaceAllString(strings.ToLower(testName), "-"), "-")
	const maxPrefix = 40
	if len(p) > maxPrefix {
		p = strings.TrimRight(p[:maxPrefix], "-")
	}
	if p == "" {
		p = "test"
	}
	return p + "-"
}
