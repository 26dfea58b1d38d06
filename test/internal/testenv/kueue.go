package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// KueueVersion is the Kueue release the tests run (hack/make/kueue.mk builds it for the real
// stack, realstack.DefaultKueueVersion) and whose Workload CRD the envtest suites install.
const KueueVersion = "v0.17.0"

const kueueModule = "sigs.k8s.io/kueue"

// KueueWorkloadCRD is the path of the Workload CRD in the Kueue module at version (downloaded
// from the module proxy if needed), for Options.CRDDirs: a suite that follows queued TrainJobs
// without running Kueue installs the kind alone and writes the Workloads Kueue would. go.mod does
// not require Kueue: the module is fetched as the Trainer's is. The CRD's two versions are served
// without a conversion webhook: read and write only the version trainstep reads
// (trainjob.WorkloadGVK).
func KueueWorkloadCRD(ctx context.Context, version string) (string, error) {
	dir, err := goModDownload(ctx, kueueModule+"@"+version)
	if err != nil {
		return "", fmt.Errorf("locating the Kueue %s module: %w", version, err)
	}
	crd := filepath.Join(dir, "config", "components", "crd", "bases", "kueue.x-k8s.io_workloads.yaml")
	if _, err := os.Stat(crd); err != nil {
		return "", fmt.Errorf("finding Kueue's Workload CRD in its module: %w", err)
	}
	return crd, nil
}
