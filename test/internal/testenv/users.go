package testenv

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// UserConfig returns a client config that authenticates as user name in groups (by a client
// certificate). It has only the rights RBAC grants it, so tests can check what a non-admin
// may do. "system:authenticated" is added by the apiserver.
func (e *Env) UserConfig(name string, groups ...string) (*rest.Config, error) {
	user, err := e.envtest.AddUser(envtest.User{Name: name, Groups: groups}, e.baseConfig())
	if err != nil {
		return nil, fmt.Errorf("provisioning user %s: %w", name, err)
	}
	// Config returns the user's own pointer; a copy keeps callers' changes to themselves.
	return rest.CopyConfig(user.Config()), nil
}

// baseConfig carries the client rate limits of the admin config over to other users:
// client-go's defaults (5 QPS) would slow tests down.
func (e *Env) baseConfig() *rest.Config {
	return &rest.Config{QPS: e.Config.QPS, Burst: e.Config.Burst}
}

// writeAdminKubeconfig writes a kubeconfig for an admin (system:masters) into the env's
// directory, for kube-controller-manager and for tests that run the CLI as a subprocess.
func (e *Env) writeAdminKubeconfig() (string, error) {
	admin, err := e.envtest.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, e.baseConfig())
	if err != nil {
		return "", fmt.Errorf("provisioning the admin user: %w", err)
	}
	data, err := admin.KubeConfig()
	if err != nil {
		return "", fmt.Errorf("rendering the admin kubeconfig: %w", err)
	}
	path := filepath.Join(e.dir, "admin.kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("writing the admin kubeconfig: %w", err)
	}
	return path, nil
}

// UserKubeconfig writes a kubeconfig for user name in groups, for running a binary as that user.
func (e *Env) UserKubeconfig(name string, groups ...string) (string, error) {
	user, err := e.envtest.AddUser(envtest.User{Name: name, Groups: groups}, e.baseConfig())
	if err != nil {
		return "", fmt.Errorf("provisioning user %s: %w", name, err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", fmt.Errorf("rendering the kubeconfig of %s: %w", name, err)
	}
	path := filepath.Join(e.dir, name+".kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("writing the kubeconfig of %s: %w", name, err)
	}
	return path, nil
}
