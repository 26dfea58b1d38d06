package cli

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/trainjob"
)

// progressGate says, for --dry-run, whether progress reporting reaches the cluster. Nothing in a
// runtime or the TrainJob says whether the Trainer's TrainJobStatus gate is on: only the pods it
// makes do (KUBEFLOW_TRAINER_SERVER_URL in the trainer step's containers). So it reads the
// namespace's JobSet pods (one LIST): one with the env means on; node pods without it, of a
// namespace with no MPI launcher, mean off (a launcher without it too);
// none leaves it unknown until the step's own nodes run, when the running message says.
func progressGate(ctx context.Context, src runtimes.Source, ns string) string {
	cs, ok := src.(runtimes.ClusterSource)
	if !ok {
		return "progress reporting: --local serves the Trainer's status endpoint; on a cluster it needs the Trainer's TrainJobStatus feature gate (v2.2+, off by default)"
	}
	sel, err := labels.Parse(trainjob.LabelReplicatedJob + " in (" + trainjob.NodeJob + "," + trainjob.LauncherJob + ")")
	if err != nil {
		return ""
	}
	pods := &corev1.PodList{}
	if err := cs.Reader.List(ctx, pods, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}, client.Limit(20)); err != nil {
		return fmt.Sprintf("progress reporting: unknown (listing trainer pods in %s: %v); it needs the Trainer's TrainJobStatus feature gate (v2.2+, off by default)", ns, err)
	}
	// The step the Trainer injects into: the launcher where there is one (MPI), else the nodes.
	step := trainjob.NodeJob
	for i := range pods.Items {
		p := &pods.Items[i]
		if trainjob.HasStatusServer(p) {
			return fmt.Sprintf("progress reporting: on (pod %s got %s from the Trainer)", p.Name, trainjob.EnvStatusURL)
		}
		if p.Labels[trainjob.LabelReplicatedJob] == trainjob.LauncherJob {
			step = trainjob.LauncherJob
		}
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; p.Labels[trainjob.LabelReplicatedJob] == step && len(p.Spec.Containers) > 0 {
			return trainjob.ProgressOffNote
		}
	}
	return fmt.Sprintf("progress reporting: unknown until a node runs in %s (the Trainer injects %s when its TrainJobStatus feature gate is on, v2.2+, off by default)", ns, trainjob.EnvStatusURL)
}
