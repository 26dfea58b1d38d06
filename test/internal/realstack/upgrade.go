package realstack

import (
	"context"
	"fmt"
)

// managerPorts are the ports of the JobSet and Trainer managers. An upgrade starts the new
// release's managers on the same ones, as a Deployment's new pod keeps its Service.
type managerPorts struct {
	jobsetWebhook, jobsetHealth, trainerWebhook, trainerHealth, trainerStatus int
}

// startManagers starts the JobSet and Trainer managers of s.Assets, with these log names.
func (s *Stack) startManagers(ctx context.Context, jobset, trainer string) error {
	if err := s.startJobSet(ctx, jobset, s.webhookCert, s.managers.jobsetWebhook, s.managers.jobsetHealth); err != nil {
		return err
	}
	return s.startTrainer(ctx, trainer, s.webhookCert, s.managers.trainerWebhook, s.managers.trainerHealth, s.managers.trainerStatus, s.opts)
}

// UpgradeTrainer upgrades the stack's Trainer and JobSet to the release of assets (a directory
// hack/build-realstack.sh built) the way a cluster admin does, with whatever is running left
// running: the old managers stop (a Deployment rollout), the new release's CRDs, webhook
// configurations and runtimes replace the old ones (`kubectl apply --server-side` of its
// manifests), and its managers start. Both releases must run the same way (release.go): an
// upgrade from v2.0 is not one this harness does.
func (s *Stack) UpgradeTrainer(ctx context.Context, assets string) error {
	from, err := trainerTakesFlags(s.Assets)
	if err != nil {
		return err
	}
	to, err := trainerTakesFlags(assets)
	if err != nil {
		return err
	}
	if from || to {
		return fmt.Errorf("upgrading %s to %s: a Trainer v2.0 manager is run another way; upgrades are from v2.1 on", s.Assets, assets)
	}
	trainerRel, jobsetRel, err := Release(assets)
	if err != nil {
		return err
	}
	for _, p := range s.procs {
		if p.name == "trainer" || p.name == "jobset" {
			if err := p.stop(); err != nil {
				return fmt.Errorf("stopping the old %s manager: %w", p.name, err)
			}
		}
	}
	s.Assets = assets
	if err := s.putCRDs(ctx, s.apply, s.stackCRDs()...); err != nil {
		return fmt.Errorf("replacing the CRDs with %s's: %w", trainerRel, err)
	}
	if err := s.startManagers(ctx, "jobset-"+jobsetRel, "trainer-"+trainerRel); err != nil {
		return err
	}
	return s.installRuntimes(ctx)
}
