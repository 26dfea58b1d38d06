package core_test

import (
	"strings"
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/lifecycle"
	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainers"
	"github.com/trainstep/trainstep/core/trainjob"
)

func planner() *trainjob.Planner {
	return &trainjob.Planner{Trainers: trainers.Builtin(), Runtimes: runtimes.ClusterSource{Reader: env.Client}}
}

func parse(t testing.TB, y string) *step.Spec {
	t.Helper()
	s, err := step.Parse([]byte(y))
	require.NoError(t, err)
	return s
}

func plan(t *testing.T, ns, y string) *trainjob.Plan {
	t.Helper()
	p, err := planner().Plan(t.Context(), parse(t, y), ns)
	require.NoError(t, err)
	return p
}

func identity(t *testing.T, key string) trainjob.Identity {
	return trainjob.Identity{Engine: "test", OwnerUID: t.Name(), StepKey: key}
}

// submit plans and submits a step, returning the TrainJob as stored.
func submit(t *testing.T, ns, y string) (*trainjob.Plan, *trainer.TrainJob) {
	t.Helper()
	p := plan(t, ns, y)
	id := identity(t, "train")
	tj, created, err := trainjob.Submit(t.Context(), env.Client, p.TrainJob(id), id)
	require.NoError(t, err)
	require.True(t, created)
	return p, tj
}

// runner runs a step with the core's lifecycle, as `executor run` does.
func runner() *lifecycle.Runner {
	return &lifecycle.Runner{Client: wc, Logs: sim.Logs, Planner: planner()}
}

func clientKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

func replaceNS(s, ns string) string { return strings.ReplaceAll(s, "{ns}", ns) }
