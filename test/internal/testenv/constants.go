package testenv

import "time"

// Waits in integration tests poll for a state with require.Eventually and these bounds; tests
// never sleep to synchronise. Timeout is generous because CI runs on 2 busy cores.
const (
	Timeout  = 30 * time.Second
	Interval = 50 * time.Millisecond
)

// DefaultTrainerVersion is the Kubeflow Trainer release whose CRDs and stock runtimes Start
// installs when Options.TrainerVersion is empty: the one go.mod pins.
const DefaultTrainerVersion = "v2.3.0"
