// Package stepcache is the step cache (docs/cache.md): a step that opts in with a cache block and
// is the same as one that succeeded in its namespace returns that one's outputs instead of
// training again. What "the same" means is Key; where successes are kept is Store.
package stepcache

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/trainstep/trainstep/core/trainjob"
)

// keyFormat changes when what enters the key changes, so an old entry is never read as a new one.
// 2: the spec of the object submitted (v2.1's podTemplateOverrides too) and the runtime's whole
// spec, where 1 had the typed spec and the part of the runtime trainstep reads. 3: the env in
// dependency order (core/step's envorder.go), the same on every face, where 2 had the order the
// face received, which on Argo was the apiserver's.
const keyFormat = 3

// keyed is everything that decides what a step trains: the spec of the TrainJob as it is
// submitted (trainer, image, command with the function's source and arguments, env values,
// resources, numNodes, initializers, runtimeRef, and the pod block as the installed Trainer
// takes it), the runtime it runs on (its kind, namespace and name, and a hash of its whole spec),
// and the user's salt.
type keyed struct {
	Format  int            `json:"format"`
	Spec    map[string]any `json:"spec"`
	Runtime keyedRuntime   `json:"runtime"`
	Salt    string         `json:"salt,omitempty"`
}

type keyedRuntime struct {
	Ref  string `json:"ref"`
	Spec string `json:"spec"`
}

// Key is the step's cache key: a SHA-256 of keyed, as 64 hex characters. The TrainJob is the one
// a step of no identity would submit, so the key is the same for every face, run, step key and
// attempt: those name the job (and label its pods), they do not change what it trains. Its
// timeout is left out too (a job that succeeded within it trained the same). Secrets never enter
// it: a step names them (pod.env, pod.envFrom) and the TrainJob carries the reference, not the
// value.
func Key(p *trainjob.Plan, salt string) (string, error) {
	spec, err := submittedSpec(p)
	if err != nil {
		return "", fmt.Errorf("rendering the step for its cache key: %w", err)
	}
	if p.Runtime.SpecHash == "" {
		return "", fmt.Errorf("runtime %s was not read from its object (runtimes.FromUnstructured), so the step's cache key cannot cover its spec", p.Runtime.Ref())
	}
	b, err := json.Marshal(keyed{Format: keyFormat, Spec: spec, Runtime: keyedRuntime{Ref: p.Runtime.Ref(), Spec: p.Runtime.SpecHash}, Salt: salt})
	if err != nil {
		return "", fmt.Errorf("hashing the step for its cache key: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// submittedSpec is the spec of the TrainJob Plan.Object submits for a step of no identity, as a
// map: the typed TrainJob (Trainer v2.2+, its pod block in spec.runtimePatches) and v2.1's
// unstructured one (in spec.podTemplateOverrides) in one form, each as its Trainer takes it.
// spec.activeDeadlineSeconds is the step's timeout, left out.
func submittedSpec(p *trainjob.Plan) (map[string]any, error) {
	obj, err := p.Object(trainjob.Identity{})
	if err != nil {
		return nil, err
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, fmt.Errorf("rendering TrainJob %s: %w", obj.GetName(), err)
		}
		u = &unstructured.Unstructured{Object: m}
	}
	spec, ok := u.Object["spec"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("TrainJob %s rendered without a spec", obj.GetName())
	}
	delete(spec, "activeDeadlineSeconds") // the object is this call's own
	return spec, nil
}
