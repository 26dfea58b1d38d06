package cli

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
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
	// offCluster is what the command can do without a cluster (run: --local), offered when no
	// cluster config is found; empty when it can do nothing.
	offCluster string
}

// bind adds --kubeconfig and --context, worded the same in every command.
func (k *kubeFlags) bind(f *pflag.FlagSet) {
	f.StringVar(&k.kubeconfig, "kubeconfig", "", "path to the kubeconfig (default $KUBECONFIG or ~/.kube/config, or in-cluster)")
	f.StringVar(&k.context, "context", "", "the kubeconfig context")
	_ = cobra.MarkFlagFilename(f, "kubeconfig")
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
	if clientcmd.IsEmptyConfig(err) {
		// client-go's own words ("try setting KUBERNETES_MASTER") name a variable nothing reads
		// any more; say where we looked and what to do instead.
		return nil, &noClusterError{looked: k.lookedAt(), inCluster: inClusterState(), offCluster: k.offCluster, cause: err}
	}
	if err != nil {
		return nil, fmt.Errorf("loading the cluster config (--kubeconfig, $KUBECONFIG, ~/.kube/config or in-cluster): %w", err)
	}
	cfg.UserAgent = "trainstep"
	return cfg, nil
}

// serviceAccountToken is where a pod's token is mounted; client-go's in-cluster config needs it.
// A variable so a test can point it elsewhere.
var serviceAccountToken = "/var/run/secrets/kubernetes.io/serviceaccount/token"

// noClusterError says that neither a kubeconfig nor the pod's in-cluster config names a cluster.
type noClusterError struct {
	looked, inCluster, offCluster string
	cause                         error
}

func (e *noClusterError) Error() string {
	fix := "set KUBECONFIG or pass --kubeconfig"
	if e.offCluster != "" {
		fix += ", or use " + e.offCluster
	}
	return fmt.Sprintf("no cluster to connect to: %s, and %s; %s", e.looked, e.inCluster, fix)
}

// Unwrap keeps client-go's error for errors.Is, without repeating its words.
func (e *noClusterError) Unwrap() error { return e.cause }

// reason is the error without its fix, for a command that goes on without a cluster anyway.
func reason(err error) error {
	var nc *noClusterError
	if errors.As(err, &nc) {
		return fmt.Errorf("%s, and %s", nc.looked, nc.inCluster)
	}
	return err
}

// lookedAt says which kubeconfig files were tried and what was wrong with them: absent, or
// present with no cluster in them (both are an empty config to client-go).
func (k *kubeFlags) lookedAt() string {
	if k.kubeconfig != "" {
		// A missing --kubeconfig is another error; here it exists and names no cluster.
		return fmt.Sprintf("the kubeconfig %s (--kubeconfig) names no cluster", k.kubeconfig)
	}
	// The files client-go reads (NewDefaultClientConfigLoadingRules): $KUBECONFIG's, else
	// ~/.kube/config as it resolved it when the process started.
	env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar)
	files := []string{clientcmd.RecommendedHomeFile}
	if env != "" {
		files = filepath.SplitList(env)
	}
	var found []string
	for _, f := range files {
		if _, err := os.Stat(f); err == nil {
			found = append(found, f)
		}
	}
	switch {
	case len(found) > 0:
		return fmt.Sprintf("the kubeconfig %s names no cluster", strings.Join(found, ", "))
	case env != "":
		return fmt.Sprintf("no kubeconfig found ($KUBECONFIG names no file that exists: %s)", env)
	default:
		return fmt.Sprintf("no kubeconfig found ($KUBECONFIG is unset and %s does not exist)", clientcmd.RecommendedHomeFile)
	}
}

// inClusterState says why client-go did not use the in-cluster config; its conditions are
// client-go's (inClusterClientConfig.Possible).
func inClusterState() string {
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" || os.Getenv("KUBERNETES_SERVICE_PORT") == "" {
		return "this is not a pod in a cluster ($KUBERNETES_SERVICE_HOST and $KUBERNETES_SERVICE_PORT are not set)"
	}
	return fmt.Sprintf("this pod has no ServiceAccount token at %s (none is mounted where automountServiceAccountToken is false)", serviceAccountToken)
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
