package argo

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/argoproj/argo-workflows/v3/pkg/plugins/executor"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/core/step"
)

// FuzzParseRequest decodes a request body as the handler does and parses it as executeTemplate
// does: nothing panics; a template that is not ours is told apart; a refusal is an InvalidError
// whose every field error names a field (never "<nil>"); an accepted request has a substituted
// key and a whole, non-negative attempt.
func FuzzParseRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var args executor.ExecuteTemplateArgs
		if json.Unmarshal(data, &args) != nil {
			return // the handler answers 400
		}
		body, err := pluginBody(args.Template, DefaultKey)
		if err != nil {
			require.Contains(t, err.Error(), "template.plugin")
			return
		}
		if body == nil {
			return // not ours: 200 {}
		}
		req, err := parseRequest(args, DefaultKey, body)
		if err != nil {
			require.True(t, step.IsInvalid(err), "a refusal must be an InvalidError: %v", err)
			var inv *step.InvalidError
			require.ErrorAs(t, err, &inv)
			require.NotEmpty(t, inv.Errs)
			for _, e := range inv.Errs {
				require.NotEmpty(t, e.Field, "every refusal names a field: %v", e)
				require.NotContains(t, e.Field, "<nil>")
			}
			return
		}
		require.NotEmpty(t, req.Key)
		require.NotContains(t, req.Key, "{{")
		require.GreaterOrEqual(t, req.Attempt, 0)
		require.NotNil(t, req.Spec)
		require.GreaterOrEqual(t, req.Timeout, time.Duration(0))
		_ = req.identity("1").Name()
		_ = req.deadlines()
	})
}
