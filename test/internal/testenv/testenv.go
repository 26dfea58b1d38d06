// Package testenv is the control plane every trainstep integration test runs against: a real
// etcd and kube-apiserver started by controller-runtime's envtest, the Kubeflow Trainer CRDs
// and stock runtimes read straight from the pinned Trainer module, RBAC enforced, and on
// request a kube-controller-manager for garbage collection and namespace deletion.
//
// The binaries come from KUBEBUILDER_ASSETS, which `make test-assets` fills; a missing binary
// is an error, never a skipped test.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/trainstep/trainstep/core/trainjob"
)

// Options selects what Start brings up.
type Options struct {
	// TrainerVersion is the github.com/kubeflow/trainer/v2 release whose CRDs and stock
	// runtimes are installed; DefaultTrainerVersion when empty. Any version the module proxy
	// serves works, whether go.mod requires it or not.
	TrainerVersion string
	// ControllerManager starts a kube-controller-manager running the garbage collector, the
	// namespace controller and the ServiceAccount controller. Without it, owned objects are
	// never collected and deleted namespaces stay Terminating.
	ControllerManager bool
	// CRDDirs are further directories of CRD manifests, or single manifest files, to install,
	// e.g. Tekton's.
	CRDDirs []string
	// APIServerArgs are further kube-apiserver flags (name without dashes → value), for suites
	// that need the apiserver configured their way (fault injection: no watch cache, frequent
	// etcd compaction).
	APIServerArgs map[string]string
}

// Env is a running control plane. Its fields are read-only after Start.
type Env struct {
	// Config authenticates as an admin (group system:masters).
	Config *rest.Config
	// Client is an admin client whose scheme knows the client-go and Trainer v1alpha1 types.
	Client client.Client
	Scheme *runtime.Scheme
	// Kubeconfig is the path of an admin kubeconfig file, for subprocesses such as the CLI.
	Kubeconfig string

	TrainerVersion   string
	TrainerModuleDir string
	// StockRuntimes names the runtimes installed from the Trainer module's manifests.
	StockRuntimes []string

	envtest  *envtest.Environment
	kcm      *controllerManager
	dir      string // kubeconfig and logs; removed by Stop
	stopOnce sync.Once
	stopErr  error
}

// Start brings up etcd, kube-apiserver (and kube-controller-manager if asked), installs the
// CRDs and the stock runtimes, and returns once all are usable. ctx bounds the start only;
// the processes run until Stop. On error, whatever was started has been stopped again.
func Start(ctx context.Context, opts Options) (*Env, error) {
	if opts.TrainerVersion == "" {
		opts.TrainerVersion = DefaultTrainerVersion
	}
	assets, err := assetsDir(opts.ControllerManager)
	if err != nil {
		return nil, err
	}
	moduleDir, err := trainerModuleDir(ctx, opts.TrainerVersion)
	if err != nil {
		return nil, fmt.Errorf("locating the Trainer %s module: %w", opts.TrainerVersion, err)
	}
	scheme, err := trainjob.NewScheme()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "trainstep-testenv-")
	if err != nil {
		return nil, fmt.Errorf("creating the test environment's directory: %w", err)
	}

	e := &Env{Scheme: scheme, TrainerVersion: opts.TrainerVersion, TrainerModuleDir: moduleDir, dir: dir}
	if err := e.start(ctx, assets, opts); err != nil {
		if stopErr := e.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		return nil, err
	}
	return e, nil
}

func (e *Env) start(ctx context.Context, assets string, opts Options) error {
	e.envtest = &envtest.Environment{
		Scheme:                e.Scheme,
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     append([]string{filepath.Join(e.TrainerModuleDir, "manifests", "base", "crds")}, opts.CRDDirs...),
		ErrorIfCRDPathMissing: true,
	}
	configureAPIServer(e.envtest)
	for k, v := range opts.APIServerArgs {
		e.envtest.ControlPlane.GetAPIServer().Configure().Set(k, v)
	}
	cfg, err := e.envtest.Start()
	if err != nil {
		return fmt.Errorf("starting etcd and kube-apiserver from %s and installing CRDs: %w", assets, err)
	}
	e.Config = cfg
	if e.Client, err = client.New(cfg, client.Options{Scheme: e.Scheme}); err != nil {
		return fmt.Errorf("creating the admin client: %w", err)
	}
	if e.Kubeconfig, err = e.writeAdminKubeconfig(); err != nil {
		return err
	}
	runtimesDir := filepath.Join(e.TrainerModuleDir, "manifests", "base", "runtimes")
	if e.StockRuntimes, err = installStockRuntimes(ctx, e.Client, runtimesDir); err != nil {
		return fmt.Errorf("installing the Trainer %s stock runtimes: %w", e.TrainerVersion, err)
	}
	if opts.ControllerManager {
		kcm := filepath.Join(assets, "kube-controller-manager")
		if e.kcm, err = startControllerManager(kcm, e.Kubeconfig, filepath.Join(e.dir, "kube-controller-manager.log")); err != nil {
			return err
		}
		if err := e.kcm.waitReady(ctx, e.Client); err != nil {
			return err
		}
	}
	return nil
}

// configureAPIServer sets the apiserver flags the tests depend on, on top of envtest's defaults.
func configureAPIServer(env *envtest.Environment) {
	api := env.ControlPlane.GetAPIServer()
	args := api.Configure()
	// envtest defaults to RBAC today; say so, since the RBAC tests mean nothing without it.
	// envtest's admin user is in system:masters, which RBAC always allows.
	args.Set("authorization-mode", "RBAC")
	// OpenShift's default: an owner reference with blockOwnerDeletion needs update on the owner's
	// finalizers. Every face's RBAC is tested under it.
	args.Append("enable-admission-plugins", "OwnerReferencesPermissionEnforcement")
	// A graceful stop usually takes about a second, but with both cores busy (make test runs two
	// suites at once) it has passed envtest's 20 s default, which envtest reports as an error
	// after killing the process. Allow it longer; nothing waits on it but the suite's end.
	api.StopTimeout = apiserverStopTimeout
}

// apiserverStopTimeout bounds kube-apiserver's graceful stop before envtest kills it.
const apiserverStopTimeout = 90 * time.Second

// Stop ends kube-controller-manager first (it would otherwise log errors while the apiserver
// goes away), then the apiserver and etcd, and removes the temp directory. It is safe to call
// more than once.
func (e *Env) Stop() error {
	e.stopOnce.Do(func() {
		var errs []error
		if e.kcm != nil {
			errs = append(errs, e.kcm.stop())
		}
		if e.envtest != nil {
			if err := e.envtest.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stopping kube-apiserver and etcd: %w", err))
			}
		}
		if err := os.RemoveAll(e.dir); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", e.dir, err))
		}
		e.stopErr = errors.Join(errs...)
	})
	return e.stopErr
}

// assetsDir returns KUBEBUILDER_ASSETS after checking that the binaries Start needs are there.
func assetsDir(withControllerManager bool) (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		return "", errors.New("KUBEBUILDER_ASSETS is not set: run `make test-assets` to build kube-apiserver and etcd, " +
			"then set KUBEBUILDER_ASSETS to the directory that holds them (`make test` does both)")
	}
	binaries := []string{"kube-apiserver", "etcd"}
	if withControllerManager {
		binaries = append(binaries, "kube-controller-manager")
	}
	for _, b := range binaries {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("KUBEBUILDER_ASSETS=%s has no %s (%w): run `make test-assets` to build it", dir, b, err)
		}
	}
	return dir, nil
}

// APIServerAddr is kube-apiserver's host:port.
func (e *Env) APIServerAddr() string {
	return e.envtest.ControlPlane.APIServer.SecureServing.ListenAddr.HostPort()
}

// Via returns the admin config and a kubeconfig file that reach the apiserver through addr (a
// fault proxy) instead of directly.
func (e *Env) Via(addr string) (*rest.Config, string, error) {
	cfg := rest.CopyConfig(e.Config)
	cfg.Host = "https://" + addr
	b, err := os.ReadFile(e.Kubeconfig)
	if err != nil {
		return nil, "", err
	}
	path := filepath.Join(e.dir, "via-"+strings.ReplaceAll(addr, ":", "-")+".kubeconfig")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(b), e.APIServerAddr(), addr)), 0o600); err != nil {
		return nil, "", err
	}
	return cfg, path, nil
}
