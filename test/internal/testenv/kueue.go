package testenv

import (
	"context"
	"fmt"
	"path/filepath"
)

const kueueModule = "sigs.k8s.io/kueue"

// KueueWorkloadCRD is the path of the Workload CRD in the Kueue module at version, for a suite
// that follows queued TrainJobs without running Kueue (its tests write the Workloads Kueue
// would). go.mod does not require Kueue: the module is fetched as the Trainer's is.
func KueueWorkloadCRD(ctx context.Context, version string) (string, error) {
	dir, err := goModDownload(ctx, kueueModule+"@"+version)
	if err != nil {
		return "", fmt.Errorf("locating the Kueue %s module: %w", version, err)
	}
	return filepath.Join(dir, "config", "components", "crd", "bases", "kueue.x-k8s.io_workloads.yaml"), nil
}
