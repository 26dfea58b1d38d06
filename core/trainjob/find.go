package trainjob

import (
	"context"
	"fmt"
	"sort"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FindByIdentity returns the step's TrainJob found by its identity labels rather than its name,
// or nil when there is none: one made under a name an earlier release gave it (names were
// shortened, and Argo's got a run part, on 1 Dec 2026), so a step that started before an upgrade
// adopts its job after it instead of starting a second one (see Identity.Adopts for which jobs
// count).
//
// A face calls it only when the name finds nothing and it would create. indexed means r is a
// cache with RegisterIndexes: the lookup is an index read and costs the apiserver nothing.
// Otherwise r is the apiserver and the lookup is one LIST by label selector.
func FindByIdentity(ctx context.Context, r client.Reader, namespace string, id Identity, indexed bool) (*trainer.TrainJob, error) {
	var found []trainer.TrainJob
	if indexed {
		for _, step := range id.stepHashes() {
			l := &trainer.TrainJobList{}
			if err := r.List(ctx, l, client.InNamespace(namespace), client.MatchingFields{IndexTrainJobStep: step}); err != nil {
				return nil, fmt.Errorf("looking up the TrainJob of step %s by its labels: %w", id.StepKey, err)
			}
			found = append(found, l.Items...)
		}
	} else {
		// The labels both identities share; the step hash is checked by Adopts.
		l := &trainer.TrainJobList{}
		sel := client.MatchingLabels{}
		for _, k := range []string{LabelManagedBy, LabelEngine, LabelOwnerUID, LabelAttempt} {
			sel[k] = id.earlierLabels()[k]
		}
		if err := r.List(ctx, l, client.InNamespace(namespace), sel); err != nil {
			return nil, fmt.Errorf("looking up the TrainJob of step %s by its labels: %w", id.StepKey, err)
		}
		found = l.Items
	}
	var ours []*trainer.TrainJob
	for i := range found {
		if id.Adopts(&found[i]) {
			ours = append(ours, &found[i])
		}
	}
	if len(ours) == 0 {
		return nil, nil
	}
	// Two only if a release without this lookup started a second job after an upgrade: the
	// first is the one the step started with.
	sort.Slice(ours, func(i, j int) bool {
		a, b := ours[i].CreationTimestamp, ours[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return ours[i].Name < ours[j].Name
	})
	return ours[0], nil
}

// stepHashes are the trainstep.dev/step values a TrainJob of this step may carry: this
// release's, and the one made without the run.
func (id Identity) stepHashes() []string {
	now, earlier := id.Labels()[LabelStep], id.earlierLabels()[LabelStep]
	if now == earlier {
		return []string{now}
	}
	return []string{now, earlier}
}
