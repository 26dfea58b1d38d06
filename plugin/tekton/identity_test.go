package tekton

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
)

// The step's namePrefix names the run's TrainJob; without a spec (a cancel whose params no
// longer parse) the name is the run's, and the labels find the job either way.
func TestIdentityTakesTheStepsNamePrefix(t *testing.T) {
	run := &v1beta1.CustomRun{ObjectMeta: metav1.ObjectMeta{Name: "train-run", UID: "uid-1"}}
	plain := identity(run, nil)
	assert.Regexp(t, `^train-run-[0-9a-f]{12}$`, plain.Name())
	named := identity(run, &step.Spec{NamePrefix: "nightly"})
	assert.Regexp(t, `^nightly-[0-9a-f]{12}$`, named.Name())
	assert.Equal(t, plain.Labels(), named.Labels())
}
