package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// KueueVersion is the Kueue release whose Workload CRD WorkloadCRD returns: the one the real
// stack runs (hack/make/kueue.mk, realstack.DefaultKueueVersion).
const KueueVersion = "v0.17.0"

// WorkloadCRD returns the path of Kueue's Workload CRD in the Go module cache (downloaded from
// the module proxy if needed), for Options.CRDDirs: a suite that proves a face's Workload cache
// against a real apiserver installs the kind alone and makes the Workloads itself, as Kueue would,
// without running Kueue. The CRD's two versions are served without a conversion webhook: read and
// write only the version trainstep reads (trainjob.WorkloadGVK).
func WorkloadCRD(ctx context.Context) (string, error) {
	dir, err := goModDownload(ctx, "sigs.k8s.io/kueue@"+KueueVersion)
	if err != nil {
		return "", fmt.Errorf("locating the Kueue %s module: %w", KueueVersion, err)
	}
	crd := filepath.Join(dir, "config", "components", "crd", "bases", "kueue.x-k8s.io_workloads.yaml")
	if _, err := os.Stat(crd); err != nil {
		return "", fmt.Errorf("finding Kueue's Workload CRD in its module: %w", err)
	}
	return crd, nil
}
