package runtimes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// SpecHash is a SHA-256 of the runtime object's whole spec, as 64 hex characters, "" when it has
// none: what the step cache keys the runtime by (core/stepcache), since all of it decides what a
// step trains (the world size, the initializers' images and env, the pod template's volumes,
// tolerations and sidecars) and trainstep reads only part of it. encoding/json writes a map's
// keys in order, so a spec hashes the same however its object was read.
func SpecHash(u *unstructured.Unstructured) string {
	spec, ok := u.Object["spec"]
	if !ok {
		return ""
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return "" // not JSON's values, so not an object the apiserver served: Key refuses it
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
