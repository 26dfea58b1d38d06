package trainers

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/step"
)

// MPITrainer runs a function under mpirun.
//
// No stock runtime is labelled "mpi": the MPI runtimes a Trainer ships are labelled deepspeed and
// mlx. So MPITrainer walks the frameworks mpi, deepspeed, mlx in that order (deepspeed's image
// carries Python, MPI and torch, the widest base), and it accepts any runtime that has
// mlPolicy.mpi, whatever its label, when the runtime is named explicitly: the policy is what
// mpirun needs, the label only helps discovery.
type MPITrainer struct {
	Function
	// NumProcPerNode becomes spec.trainer.numProcPerNode: the hostfile's slots per node.
	NumProcPerNode *int32 `json:"numProcPerNode,omitempty"`
}

func newMPI(_ string, raw json.RawMessage) (Trainer, field.ErrorList) {
	t := &MPITrainer{}
	if errs := step.DecodeStrict(raw, t, trainerPath); len(errs) > 0 {
		return nil, errs
	}
	return t, append(t.validate(), validateProcs(t.NumProcPerNode)...)
}

// Kind implements Trainer.
func (t *MPITrainer) Kind() string { return "MPITrainer" }

// Frameworks implements Trainer.
func (t *MPITrainer) Frameworks() []string { return []string{"mpi", "deepspeed", "mlx"} }

// ValidateRuntime implements Trainer: the MPI policy decides, not the label.
func (t *MPITrainer) ValidateRuntime(r *runtimes.Runtime) *field.Error {
	if err := validateType(t, r, runtimes.CustomTrainer); err != nil {
		return err
	}
	return requirePolicy(t, r, runtimes.PolicyMPI, "mpirun")
}

// Build implements Trainer.
func (t *MPITrainer) Build(rt *runtimes.Runtime, rc *step.RuntimeConfig) (Parts, field.ErrorList) {
	return buildFunction(&t.Function, rt, rc, nil, nil, t.NumProcPerNode)
}
