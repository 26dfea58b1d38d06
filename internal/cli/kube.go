package cli

import (
	"fmt"
	"net/http"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
)

// kubeFlags are the cluster flags every command shares.
type kubeFlags struct {
	kubeconfig string
	context    string
	namespace  string
}

// bind adds --kubeconfig and --context, worded the same in every command.
func (k *kubeFlags) bind(f *pflag.FlagSet) {
	f.StringVar(&k.kubeconfig, "kubeconfig", "", "path to the kubeconfig (default $KUBECONFIG or ~/.kube/config, or in-cluster)")
	f.StringVar(&k.context, "context", "", "the kubeconfig context")
}

// bindNamespace adds -n/--namespace; what the namespace is for differs by command, so the help
// says it. An empty value falls back to the kubeconfig context's namespace (see ns).
func (k *kubeFlags) bindNamespace(f *pflag.FlagSet, def, usage string) {
	f.StringVarP(&k.namespace, "namespace", "n", def, usage+" (default: the kubeconfig context's)")
}

func (k *kubeFlags) loader() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: k.context})
}

// restConfig loads the kubeconfig (or the in-cluster config inside a pod).
func (k *kubeFlags) restConfig() (*rest.Config, error) {
	cfg, err := k.loader().ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the cluster config (--kubeconfig, $KUBECONFIG, ~/.kube/config or in-cluster): %w", err)
	}
	cfg.UserAgent = "trainstep"
	return cfg, nil
}

// ns is the step namespace: the flag, else the kubeconfig context's (or the pod's) namespace.
func (k *kubeFlags) ns() string {
	if k.namespace != "" {
		return k.namespace
	}
	if ns, _, err := k.loader().Namespace(); err == nil && ns != "" {
		return ns
	}
	return "default"
}

func newClient(cfg *rest.Config) (client.WithWatch, error) {
	return newClientFor(cfg, nil)
}

// newClientFor is newClient over a given HTTP client (nil: its own), to share its connections.
func newClientFor(cfg *rest.Config, hc *http.Client) (client.WithWatch, error) {
	s, err := trainjob.NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: s, HTTPClient: hc})
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster at %s: %w", cfg.Host, err)
	}
	return c, nil
}
