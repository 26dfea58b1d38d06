package cli

import (
	"fmt"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kubeFlags are the cluster flags every command shares.
type kubeFlags struct {
	kubeconfig string
	context    string
	namespace  string
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

func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := trainer.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

func newClient(cfg *rest.Config) (client.WithWatch, error) {
	s, err := newScheme()
	if err != nil {
		return nil, fmt.Errorf("building the API scheme: %w", err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster at %s: %w", cfg.Host, err)
	}
	return c, nil
}
