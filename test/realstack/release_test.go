package realstack_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/test/internal/realstack"
)

// The suite runs on every Trainer release of the compatibility matrix (REALSTACK_ASSETS). What a
// release can do is read as trainstep reads it, from the installed CRD and runtimes; where a test
// meets a release without what it exercises, it proves what trainstep does instead and says so
// (realstack.Lacks), for the table.

// installedAPI is what trainstep reads of the installed Trainer from its CRD, as every face does.
func installedAPI(t *testing.T) trainjob.API {
	t.Helper()
	api, err := trainjob.DetectAPI(t.Context(), stack.Client)
	require.NoError(t, err)
	return api
}

// trainerRelease is the stack's Trainer release, for messages.
func trainerRelease(t *testing.T) string {
	t.Helper()
	v, _, err := realstack.Release(stack.Assets)
	require.NoError(t, err)
	return v
}

// hasRuntime says whether the release ships the stock runtime name.
func hasRuntime(name string) bool { return slices.Contains(stack.Runtimes, name) }
