package cli

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/trainjob"
)

// progressGate says, for --dry-run, whether progress reporting reaches the cluster. Nothing in a
// runtime or the TrainJob says whether the Trainer's TrainJobStatus gate is on: only the pods it
// makes do (KUBEFLOW_TRAINER_SERVER_URL in the trainer container). So it reads node pods the
// Trainer made in the namespace (one LIST): one with the env means on, ones without mean off;
// none leaves it unknown until the step's own nodes run, when the running message says.
func progressGate(ctx context.Context, src runtimes.Source, ns string) string {
	cs, ok := src.(runtimes.ClusterSource)
	if !ok {
		return "progress reporting: --local serves the Trainer's status endpoint; on a cluster it needs the Trainer's TrainJobStatus feature gate (v2.2+, off by default)"
	}
	pods := &corev1.PodList{}
	if err := cs.Reader.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{trainjob.LabelReplicatedJob: trainjob.NodeJob}, client.Limit(20)); err != nil {
		return fmt.Sprintf("progress reporting: unknown (listing node pods in %s: %v); it needs the Trainer's TrainJobStatus feature gate (v2.2+, off by default)", ns, err)
	}
	seen := false
	for i := range pods.Items {
		p := &pods.Items[i]
		if len(p.Spec.Containers) == 0 {
			continue
		}
		if trainjob.HasStatusServer(p) {
			return fmt.Sprintf("progress reporting: on (pod %s got %s from the Trainer)", p.Name, trainjob.EnvStatusURL)
		}
		seen = true
	}
	if seen {
		return trainjob.ProgressOffNote
	}
	return fmt.Sprintf("progress reporting: unknown until a node runs in %s (the Trainer injects %s when its TrainJobStatus feature gate is on, v2.2+, off by default)", ns, trainjob.EnvStatusURL)
}
