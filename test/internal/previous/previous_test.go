package previous

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestNamesAsThePreviousReleaseDid: the names and step hashes core/trainjob/find_test.go takes as
// the previous release's, from this copy of its code.
func TestNamesAsThePreviousReleaseDid(t *testing.T) {
	for _, tc := range []struct {
		id         Identity
		name, step string
	}{
		{Identity{"argo", "wf-uid", "train-dag-x7k2p.train-model(0)", 1}, "train-dag-x7k2p-train-model-0596d29cc3d6", "0596d29cc3d675fc"},
		{Identity{"cli", "wf-uid", "train-dag-x7k2p.train-model(0)", 1}, "train-dag-x7k2p-train-model-2a0c42601c6d", "2a0c42601c6d65b8"},
		{Identity{"argo", "wf-uid", "train-dag-x7k2p.train-model", 0}, "train-dag-x7k2p-train-model-936ff54849e9", "936ff54849e942ef"},
	} {
		assert.Equal(t, tc.name, tc.id.Name())
		assert.Equal(t, tc.step, tc.id.Labels()["trainstep.dev/step"])
	}
}
