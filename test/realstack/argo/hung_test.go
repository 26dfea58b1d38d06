package argo_test

import (
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/test/internal/argoharness"
)

// TestAHungJobIsRetriedThenFailsAsHung: hangTimeout and retry through Argo's face, on the
// Trainer's real status server (the conformance stack runs with its gate off): rank 0 of each
// TrainJob reports once and then nothing; trainstep deletes the hung job and, as retry: asks,
// makes a second, which hangs too; the node fails as hung, retryable, naming what the second
// last reported.
func TestAHungJobIsRetriedThenFailsAsHung(t *testing.T) {
	wf := harness.Submit(t, workflow("hung", `          framework: torch
          hangTimeout: 15s
          retry: {limit: 1}
          trainer:
            numNodes: 1
            env: {KWOK_HOLD: "1"}
            func: "def train():\n    pass\n"
`))
	harness.RunAgent(t, wf.Name, timeout)
	names := stack.ReportOnceEach(t, argoharness.Namespace, func() []string {
		var names []string
		for _, tj := range trainJobs(t, wf) {
			names = append(names, tj.Name)
		}
		return names
	}, 2)
	got := harness.WaitPhase(t, wf.Name, timeout)
	require.Equal(t, wfv1.WorkflowFailed, got.Status.Phase, argoharness.Nodes(got))
	node := trainNode(got)
	require.NotNil(t, node, argoharness.Nodes(got))
	assert.True(t, strings.HasPrefix(node.Message, "failure-class=hung retryable=true: "), node.Message)
	assert.Regexp(t, `TrainJob \S+ is hung: its progress has not moved for 15s \(hangTimeout\); it last reported 38% at \S+Z`, node.Message)
	assert.Equal(t, names[1], argoharness.Output(node, "trainjob-name"), "the retry's TrainJob is the step's")
	assert.Empty(t, trainJobs(t, got), "both hung TrainJobs are deleted")
}
