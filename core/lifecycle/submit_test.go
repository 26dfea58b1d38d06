package lifecycle

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/core/trainjob"
)

// What planning warns of (hangTimeout's limits, a deprecated runtime) is in the step's first
// message, which every face shows: the Argo node's, the CustomRun's, executor run's.
func TestTheFirstMessageCarriesThePlansWarnings(t *testing.T) {
	e, _ := engine(t, nil)
	st := e.Look(t.Context(), Step{Spec: parse(t, validStep+"hangTimeout: 30m\n"), Namespace: "ns", Identity: identity()})
	require.True(t, st.Created, st.Message)
	assert.Equal(t, trainjob.PhasePending, st.Phase)
	assert.Regexp(t, `^TrainJob \S+ is starting: 0/2 nodes running; hangTimeout counts only from the job's first progress report .*a job that never reports is never hung$`, st.Message)

	e, _ = engine(t, nil)
	st = e.Look(t.Context(), Step{Spec: parse(t, validStep), Namespace: "ns", Identity: identity()})
	assert.Regexp(t, `^TrainJob \S+ is starting: 0/2 nodes running$`, st.Message, "nothing to warn of")
}
