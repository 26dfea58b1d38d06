package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/internal/compat"
)

// jsonLines is `go test -json` output of two packages: one with a passing test, a failing
// testify assertion in a subtest and a t.Fatalf; one whose TestMain failed before any test.
const jsonLines = `{"Action":"start","Package":"github.com/trainstep/trainstep/test/e2e/argo"}
{"Action":"run","Package":"github.com/trainstep/trainstep/test/e2e/argo","Test":"TestOK"}
{"Action":"output","Package":"github.com/trainstep/trainstep/test/e2e/argo","Test":"TestOK/v20","Output":"    pod_test.go:12: compat-note: Trainer v2.0.1 has no pod mechanism; refused by name\n"}
{"Action":"output","Package":"github.com/trainstep/trainstep/test/e2e/argo","Test":"TestOK","Output":"    pod_test.go:12: compat-note: Trainer v2.0.1 has no pod mechanism; refused by name\n"}
{"Action":"pass","Package":"github.com/trainstep/trainstep/test/e2e/argo","Test":"TestOK"}
{"Action":"run","Package":"github.com/trainstep/trainstep/test/e2e/argo","Test":"TestOutputs"}
{"Action":"run","Package":"github.com/trainstep/trainstep/test/e2e/argo","Test":"TestOutputs/model"}
{"Action":"output","Package":"github.com/trainstep/trainstep/test/e2e/argo","Test":"TestOutputs/model","Output":"    outputs_test.go:42: \n"}
{"Action":"output","Package":"github.com/trainstep/trainstep/test/e2e/argo","Test":"TestOutputs/model","Output":"        \tError Trace:\t/w/test/e2e/argo/outputs_test.go:42\n"}
{"Action":"output","Package":"github.com/trainstep/trainstep/test/e2e/argo","Test":"TestOutputs/model","Output":"        \tError:      \tReceived unexpected error:\n"}
{"Action":"output","Package":"github.com/trainstep/trainstep/test/e2e/argo","Test":"TestOutputs/model","Output":"        \t            \tworkflow phase Failed\n"}
{"Action":"output","Package":"github.com/trainstep/trainstep/test/e2e/argo","Test":"TestOutputs/model","Output":"        \tMessages:   \tthe step must succeed\n"}
{"Action":"fail","Package":"github.com/trainstep/trainstep/test/e2e/argo","Test":"TestOutputs/model"}
{"Action":"fail","Package":"github.com/trainstep/trainstep/test/e2e/argo","Test":"TestOutputs"}
{"Action":"run","Package":"github.com/trainstep/trainstep/test/e2e/argo","Test":"TestStop"}
{"Action":"output","Package":"github.com/trainstep/trainstep/test/e2e/argo","Test":"TestStop","Output":"    stop_test.go:9: the TrainJob is still there after 1m0s\n"}
{"Action":"fail","Package":"github.com/trainstep/trainstep/test/e2e/argo","Test":"TestStop"}
{"Action":"output","Package":"github.com/trainstep/trainstep/test/e2e/argo","Output":"FAIL\n"}
{"Action":"fail","Package":"github.com/trainstep/trainstep/test/e2e/argo"}
{"Action":"start","Package":"github.com/trainstep/trainstep/test/e2e/tekton"}
{"Action":"output","Package":"github.com/trainstep/trainstep/test/e2e/tekton","Output":"realstack: stack up in 17.2s\n"}
{"Action":"output","Package":"github.com/trainstep/trainstep/test/e2e/tekton","Output":"starting the control plane: KUBEBUILDER_ASSETS is not set\n"}
{"Action":"output","Package":"github.com/trainstep/trainstep/test/e2e/tekton","Output":"FAIL\tgithub.com/trainstep/trainstep/test/e2e/tekton\t0.1s\n"}
{"Action":"fail","Package":"github.com/trainstep/trainstep/test/e2e/tekton"}
{"Action":"start","Package":"github.com/trainstep/trainstep/internal/nothing"}
{"Action":"output","Package":"github.com/trainstep/trainstep/internal/nothing","Output":"?   \tgithub.com/trainstep/trainstep/internal/nothing\t[no test files]\n"}
{"Action":"skip","Package":"github.com/trainstep/trainstep/internal/nothing"}
`

func TestParseGoTest(t *testing.T) {
	faces, err := parseGoTest(strings.NewReader("# a build line\n"+jsonLines), modulePrefix)
	require.NoError(t, err)
	assert.Equal(t, []compat.Face{
		{Package: "test/e2e/argo", Status: "fail", Cases: []compat.Case{
			{Name: "TestOK", Status: "pass", Notes: []string{"Trainer v2.0.1 has no pod mechanism; refused by name"}},
			{Name: "TestOutputs", Status: "fail", Failure: "outputs_test.go:42: Received unexpected error: workflow phase Failed: the step must succeed"},
			{Name: "TestStop", Status: "fail", Failure: "stop_test.go:9: the TrainJob is still there after 1m0s"},
		}},
		{Package: "test/e2e/tekton", Status: "fail", Failure: "starting the control plane: KUBEBUILDER_ASSETS is not set"},
	}, faces)
}

func TestParseGoTestNoPackage(t *testing.T) {
	_, err := parseGoTest(strings.NewReader("go: cannot find main module\n"), modulePrefix)
	assert.ErrorContains(t, err, "no package")
}

func TestSelectRows(t *testing.T) {
	all := matrix("/c")
	ids := func(rs []row) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.ID())
		}
		return out
	}
	for _, tc := range []struct {
		spec    string
		want    []string
		wantErr string
	}{
		{spec: "argo", want: []string{"argo@v3.6.12", "argo@v3.7.3", "argo@v3.7.9", "argo@v4.0.7"}},
		{spec: "argo@v4.0.7, tekton@v0.68.0", want: []string{"argo@v4.0.7", "tekton@v0.68.0"}},
		{spec: "trainer", want: []string{"trainer@v2.0.1", "trainer@v2.1.0", "trainer@v2.2.1", "trainer@v2.3.0"}},
		{spec: "trainer@v2.2.1", want: []string{"trainer@v2.2.1"}},
		{spec: "argo@v4.0.5", wantErr: `no row "argo@v4.0.5"`},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			got, err := selectRows(all, tc.spec)
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, ids(got))
		})
	}
	every, err := selectRows(all, "")
	require.NoError(t, err)
	assert.Len(t, every, len(all))
}

func TestRender(t *testing.T) {
	all := matrix("/c")
	faces, err := parseGoTest(strings.NewReader(jsonLines), modulePrefix)
	require.NoError(t, err)
	store := map[string]compat.Row{
		"argo@v4.0.7":   {ID: "argo@v4.0.7", System: "argo", Version: "v4.0.7", Status: "fail", Faces: faces[:1], Commit: "abc", Date: "2026-12-02T08:00:00Z"},
		"argo@v3.6.12":  {ID: "argo@v3.6.12", System: "argo", Version: "v3.6.12", Status: "error", Reason: "its assets could not be built: exit status 1"},
		"tekton@v1.3.0": {ID: "tekton@v1.3.0", System: "tekton", Version: "v1.3.0", Status: "fail", Faces: faces[1:]},
	}
	md := render(all, store)
	for _, want := range []string{
		"| argo | v4.0.7 | ✗ 1/3 cases |",
		"| argo | v3.6.12 | ✗ its assets could not be built: exit status 1 |",
		"| argo | v3.7.9 | not run yet |",
		"| trainer | v2.0.1 | not run yet |",
		"| test/e2e/argo | TestOK | ✗ (row) | not run yet | not run yet | ✓ [1](#argo-notes) |",
		"1. argo@v4.0.7, test/e2e/argo TestOK: Trainer v2.0.1 has no pod mechanism; refused by name",
		"argo@v4.0.7, test/e2e/argo TestOutputs: `outputs_test.go:42: Received unexpected error: workflow phase Failed: the step must succeed`",
		"| test/e2e/tekton | (the package) | not run yet | not run yet | ✗ [1](#tekton-failures) | not run yet |",
		"1. tekton@v1.3.0, test/e2e/tekton (the package): `starting the control plane: KUBEBUILDER_ASSETS is not set`",
		"No release of this system has been run yet.",
	} {
		assert.Contains(t, md, want)
	}
	assert.NotContains(t, md, "✓ |\n| test/e2e/argo | TestOutputs | ✗ (row) | not run yet | not run yet | ✓")
}

// A row whose assets cannot be built is an error with what the build said last, and its suite
// does not run.
func TestRowWhoseAssetsCannotBeBuiltSaysWhy(t *testing.T) {
	r := row{System: "argo", Version: "v9.9.9", Env: "ARGO_ASSETS", Dir: t.TempDir(),
		Build:    []string{"sh", "-c", "echo 'no Argo module path known for v9.9.9' >&2; exit 1"},
		Packages: []string{"./does-not-exist"}}
	res := runRow(t.Context(), r, config{timeout: time.Minute}, t.TempDir())
	assert.Equal(t, "error", res.Status)
	assert.Contains(t, res.Reason, "its assets could not be built")
	assert.Contains(t, res.Reason, "no Argo module path known for v9.9.9")
	assert.Empty(t, res.Faces)
}

// A cache directory holding another release's binary fails the row instead of proving the
// wrong release. The binary here is this test's own, whose main module is trainstep.
func TestCheckReleaseRefusesAnotherReleasesBinary(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	r := row{System: "argo", Version: "v4.0.7", Dir: filepath.Dir(exe), Binary: filepath.Base(exe), Module: "github.com/argoproj/argo-workflows/v4"}
	err = checkRelease(t.Context(), r)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not github.com/argoproj/argo-workflows/v4 v4.0.7")
	assert.NoError(t, checkRelease(t.Context(), row{Dir: "/nowhere"}), "a row without a Binary is not checked")
}
