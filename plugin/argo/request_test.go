package argo

import (
	"testing"

	"github.com/argoproj/argo-workflows/v3/pkg/plugins/executor"
	"github.com/stretchr/testify/assert"

	"github.com/trainstep/trainstep/core/step"
)

// The step's namePrefix names the node's TrainJob; the identity (labels) is the node's as ever.
func TestRequestIdentityTakesTheStepsNamePrefix(t *testing.T) {
	r := &request{Workflow: executor.ObjectMeta{Name: "wf", UID: "uid-1"}, Key: "wf-x7k2p.train", Spec: &step.Spec{}}
	plain := r.identity("1")
	assert.Regexp(t, `^wf-x7k2p-train-[0-9a-f]{12}$`, plain.Name())
	r.Spec.NamePrefix = "nightly"
	named := r.identity("1")
	assert.Regexp(t, `^nightly-[0-9a-f]{12}$`, named.Name())
	assert.Equal(t, plain.Name()[len(plain.Name())-12:], named.Name()[len(named.Name())-12:], "the same hash")
	assert.Equal(t, plain.Labels(), named.Labels())
}
