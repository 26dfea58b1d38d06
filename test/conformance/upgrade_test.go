package conformance_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainers"
	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/previous"
)

// createPrevious creates the step's TrainJob as the release before this one made it for identity
// old, owned by owner (nil: none), and records its name as the one the face must adopt: this
// release's rendering of stepYAML, stamped with that release's name, labels and annotations.
// What an upgrade of trainstep in the middle of a step leaves for the new release to find.
func createPrevious(t *testing.T, r *running, old previous.Identity, owner *metav1.OwnerReference, stepYAML string) {
	t.Helper()
	spec, err := step.Parse([]byte(stepYAML))
	require.NoError(t, err)
	planner := trainjob.Planner{Trainers: trainers.Builtin(), Runtimes: runtimes.ClusterSource{Reader: stack.Client},
		Detector: &trainjob.APIDetector{Reader: stack.Client}}
	plan, err := planner.Plan(t.Context(), spec, r.ns)
	require.NoError(t, err)
	obj, err := plan.Object(trainjob.Identity{Engine: old.Engine, OwnerUID: old.OwnerUID, StepKey: old.StepKey, Owner: owner})
	require.NoError(t, err)
	old.Stamp(obj)
	require.NoError(t, stack.Client.Create(t.Context(), obj))
	r.previous = old.Name()
}

// adoptedThePrevious: the step followed the previous release's TrainJob to its end and started
// none of its own.
func adoptedThePrevious(t *testing.T, got result) {
	require.NotEmpty(t, got.step.previous, "the face made no previous release's TrainJob")
	assert.Equal(t, got.step.previous, got.outputs[trainjob.OutName], "the step reports the previous release's TrainJob")
	var names []string
	for _, tj := range got.step.trainJobs(t) {
		names = append(names, tj.Name)
	}
	assert.Equal(t, []string{got.step.previous}, names, "one TrainJob: the previous release's")
}
