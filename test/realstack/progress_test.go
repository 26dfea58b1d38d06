package realstack_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/cli"
)

// This stack runs the Trainer with its TrainJobStatus gate off, its default: the node pods get
// no status server's URL. The step runs as it always did, its running message says progress
// reporting is off and how to turn it on, and so does a dry run once node pods show it.
func TestProgressReportingOffIsSaid(t *testing.T) {
	t.Parallel()
	ns := stack.Namespace(t)
	r := executor(t, ns, torchStep)
	require.Equal(t, cli.ExitSucceeded, r.Code, "stderr:\n%s", r.Stderr)
	assert.Contains(t, r.Stderr, "is running: 2/2 nodes; "+trainjob.ProgressOffNote)
	assert.Equal(t, "{}", r.Outputs["metrics"])
	assert.Empty(t, r.Outputs["progress-percentage"])

	dry := executor(t, ns, torchStep, "--dry-run")
	require.Equal(t, cli.ExitSucceeded, dry.Code, "stderr:\n%s", dry.Stderr)
	assert.Contains(t, dry.Stderr, "trainstep: "+trainjob.ProgressOffNote)
}
