package trainjob_test

import (
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/trainstep/trainstep/core/trainjob"
)

// previousLabels are the labels the release before 1 Dec 2026 put on a TrainJob (identity.go at
// 89c544f): no run, and the step hash sha256(engine, owner UID, step key, attempt)[:16], given
// here as computed then so that this test does not follow changes to the code under test.
// test/internal/previous has that release's naming for the face-level tests.
func previousLabels(engine, owner, step, attempt string) map[string]string {
	return map[string]string{"app.kubernetes.io/managed-by": "trainstep", "trainstep.dev/engine": engine,
		"trainstep.dev/owner-uid": owner, "trainstep.dev/step": step, "trainstep.dev/attempt": attempt}
}

// made is a TrainJob as a release named and labelled it, created at created.
func made(name string, labels map[string]string, created time.Time) *trainer.TrainJob {
	return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labels,
		CreationTimestamp: metav1.NewTime(created)}}
}

func TestAdoptsAnEarlierReleasesJob(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	argo := trainjob.Identity{Engine: "argo", OwnerUID: "wf-uid", StepKey: "train-dag-x7k2p.train-model(0)", Attempt: 1,
		Run: "1796119200", RunStarted: start}
	// As the previous release named and labelled the step's TrainJob.
	oldName, oldLabels := "train-dag-x7k2p-train-model-0596d29cc3d6", previousLabels("argo", "wf-uid", "0596d29cc3d675fc", "1")
	cli := trainjob.Identity{Engine: "cli", OwnerUID: "wf-uid", StepKey: argo.StepKey, Attempt: 1}
	oldCLIName, oldCLILabels := "train-dag-x7k2p-train-model-2a0c42601c6d", previousLabels("cli", "wf-uid", "2a0c42601c6d65b8", "1")
	attempt0 := previousLabels("argo", "wf-uid", "4bbfaaab7af6453f", "0")
	withRun := func(l map[string]string) map[string]string {
		out := map[string]string{trainjob.LabelRun: "1796000000"}
		for k, v := range l {
			out[k] = v
		}
		return out
	}
	cases := []struct {
		name string
		id   trainjob.Identity
		tj   *trainer.TrainJob
		want bool
	}{
		{"this release's job under any name", argo, made("x", argo.Labels(), start.Add(-time.Hour)), true},
		{"the previous release's job of this run", argo, made(oldName, oldLabels, start.Add(time.Minute)), true},
		{"the previous release's job made in the second the run started", argo, made(oldName, oldLabels, start), true},
		{"the previous release's job of the run before `argo retry`", argo, made(oldName, oldLabels, start.Add(-time.Second)), false},
		{"a job with the run-less hash but a run label", argo, made("x", withRun(oldLabels), start.Add(time.Minute)), false},
		{"an identity with a run and no start adopts no run-less job", trainjob.Identity{Engine: "argo", OwnerUID: "wf-uid",
			StepKey: argo.StepKey, Attempt: 1, Run: "r"}, made(oldName, oldLabels, start), false},
		{"another attempt's job", argo, made("x", attempt0, start), false},
		{"the previous release's CLI job (no run either way)", cli, made(oldCLIName, oldCLILabels, start), true},
		{"another engine's job", cli, made(oldName, oldLabels, start), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.id.Adopts(tc.tj))
		})
	}
	assert.Equal(t, oldCLILabels, cli.Labels(), "an identity without a run is labelled as the previous release labelled it")
	assert.NotEqual(t, oldCLIName, cli.Name(), "a key this long was named differently by the previous release")
}

func TestFindByIdentity(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	id := trainjob.Identity{Engine: "argo", OwnerUID: "wf-uid", StepKey: "train-dag-x7k2p.train-model", Run: "1796119200", RunStarted: start}
	old := previousLabels("argo", "wf-uid", "936ff54849e942ef", "0")
	retried := made("before-retry", old, start.Add(-time.Hour))
	mine := made("train-dag-x7k2p-train-model-936ff54849e9", old, start.Add(time.Minute))
	second := made("second", old, start.Add(2*time.Minute))
	other := made("other", previousLabels("argo", "other", "387b9439d668bdea", "0"), start.Add(time.Minute))
	scheme := runtime.NewScheme()
	require.NoError(t, trainer.AddToScheme(scheme))
	for _, indexed := range []bool{true, false} {
		for _, tc := range []struct {
			name string
			jobs []client.Object
			want string
		}{
			{"none", []client.Object{other}, ""},
			{"only the run before argo retry", []client.Object{retried, other}, ""},
			{"the previous release's job of this run", []client.Object{retried, mine, other}, mine.Name},
			{"two (a second started by a release without this lookup): the first", []client.Object{second, mine}, mine.Name},
		} {
			t.Run(tc.name, func(t *testing.T) {
				b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.jobs...)
				if indexed {
					b = b.WithIndex(&trainer.TrainJob{}, trainjob.IndexTrainJobStep, func(o client.Object) []string {
						return []string{o.GetLabels()[trainjob.LabelStep]}
					})
				}
				got, err := trainjob.FindByIdentity(t.Context(), b.Build(), "ns", id, indexed)
				require.NoError(t, err)
				if tc.want == "" {
					assert.Nil(t, got)
					return
				}
				require.NotNil(t, got)
				assert.Equal(t, tc.want, got.Name)
			})
		}
	}
}
