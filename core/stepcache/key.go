// Package stepcache is the step cache (docs/cache.md): a step that opts in with a cache block and
// is the same as one that succeeded in its namespace returns that one's outputs instead of
// training again. What "the same" means is Key; where successes are kept is Store.
package stepcache

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/trainjob"
)

// keyFormat changes when what enters the key changes, so an old entry is never read as a new one.
const keyFormat = 1

// keyed is everything that decides what a step trains: the TrainJob's spec as it would be
// submitted (trainer, image, command with the function's source and arguments, env values,
// resources, numNodes, initializers, the pod block), the runtime it runs on as trainstep read it
// (its image, command, env, policy and replicated jobs), and the user's salt.
type keyed struct {
	Format  int                  `json:"format"`
	Spec    trainer.TrainJobSpec `json:"spec"`
	Runtime runtimes.Runtime     `json:"runtime"`
	Salt    string               `json:"salt,omitempty"`
}

// Key is the step's cache key: a SHA-256 of keyed, as 64 hex characters. The TrainJob is the one
// a step of no identity would submit, so the key is the same for every face, run, step key and
// attempt: those name the job, they do not change what it trains. Its timeout is left out too
// (a job that succeeded within it trained the same). Secrets never enter it: a step names them
// (pod.env, pod.envFrom) and the TrainJob carries the reference, not the value.
func Key(p *trainjob.Plan, salt string) (string, error) {
	tj := p.TrainJob(trainjob.Identity{})
	tj.Spec.ActiveDeadlineSeconds = 0
	b, err := json.Marshal(keyed{Format: keyFormat, Spec: tj.Spec, Runtime: p.Runtime, Salt: salt})
	if err != nil {
		return "", fmt.Errorf("hashing the step for its cache key: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
