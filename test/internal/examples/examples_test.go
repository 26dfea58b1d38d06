package examples

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, header string
		want         Step
		wantErr      string
	}{{
		name: "release, secret and command",
		header: `# Needs: Kubeflow Trainer v2.1 or later with its stock runtimes.
#   kubectl create secret generic hf-token --from-literal=HF_TOKEN=hf_x --from-literal=B=c=d
#   executor run -f examples/steps/x.yaml
framework: torch
`,
		want: Step{NeedsMinor: 1, Run: "executor run -f examples/steps/x.yaml"},
	}, {
		name: "a queue named across a line break",
		header: `# Needs: Kubeflow Trainer v2.0.1 or later, and a LocalQueue named user-queue in the
# step's namespace.
#   executor run -f examples/steps/x.yaml
`,
		want: Step{NeedsMinor: 0, LocalQueue: "user-queue", Run: "executor run -f examples/steps/x.yaml"},
	}, {
		name: "run twice, here",
		header: `# Needs: Kubeflow Trainer v2.2 or later, or no cluster:
#   executor run --local -f examples/steps/x.yaml --attempt 0
#   executor run --local -f examples/steps/x.yaml --attempt 1
`,
		want: Step{NeedsMinor: 2, Local: true, Run: "executor run --local -f examples/steps/x.yaml --attempt 0",
			Runs: []string{"executor run --local -f examples/steps/x.yaml --attempt 0", "executor run --local -f examples/steps/x.yaml --attempt 1"}},
	}, {
		name:    "run both here and on a cluster",
		header:  "# Needs: Kubeflow Trainer v2.2 or later\n#   executor run --local -f examples/steps/x.yaml\n#   executor run -f examples/steps/x.yaml\n",
		wantErr: `x.yaml: the header runs it both with and without --local`,
	}, {
		name:    "no release",
		header:  "# Needs: a cluster\n#   executor run -f examples/steps/x.yaml\n",
		wantErr: `x.yaml: the header does not say which Kubeflow Trainer release it needs`,
	}, {
		name:    "no command",
		header:  "# Needs: Kubeflow Trainer v2.2 or later\nframework: torch\n#   executor run -f examples/steps/x.yaml\n",
		wantErr: `x.yaml: the header has no command that runs it`,
	}, {
		name:    "a bad literal",
		header:  "# Needs: Kubeflow Trainer v2.2 or later\n#   kubectl create secret generic s --from-literal=novalue\n",
		wantErr: `"--from-literal=novalue" is not --from-literal=KEY=VALUE`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse("x.yaml", []byte(tc.header))
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want.NeedsMinor, got.NeedsMinor)
			assert.Equal(t, tc.want.LocalQueue, got.LocalQueue)
			assert.Equal(t, tc.want.Run, got.Run)
			assert.Equal(t, tc.want.Local, got.Local)
			if tc.want.Runs != nil {
				assert.Equal(t, tc.want.Runs, got.Runs)
			}
		})
	}
}

func TestParseReadsTheSecrets(t *testing.T) {
	s, err := Parse("x.yaml", []byte("# Needs: Kubeflow Trainer v2.2 or later\n"+
		"#   kubectl create secret generic hf-token --from-literal=HF_TOKEN=hf_x --from-literal=B=c=d\n"+
		"#   executor run -f examples/steps/x.yaml\n"))
	require.NoError(t, err)
	require.Len(t, s.Secrets, 1)
	assert.Equal(t, "hf-token", s.Secrets[0].Name)
	assert.Equal(t, map[string]string{"HF_TOKEN": "hf_x", "B": "c=d"}, s.Secrets[0].StringData)
}

// Every step example's header is one the suites can follow, and runs the file it is in.
func TestEveryStepExampleHasAHeaderToFollow(t *testing.T) {
	steps, err := Steps()
	require.NoError(t, err)
	queued, local := 0, 0
	for _, s := range steps {
		for _, run := range s.Runs {
			want := "executor run -f examples/steps/" + s.Name
			if s.Local {
				want = "executor run --local -f examples/steps/" + s.Name
			}
			assert.True(t, strings.HasPrefix(run, want), "%s: the header's command %q runs another file, or puts -f elsewhere than after run [--local]", s.Name, run)
		}
		if s.LocalQueue != "" {
			queued++
		}
		if s.Local {
			local++
		}
	}
	// The conformance suite and test/e2e/cli run these; with none, their tests would pass having
	// run nothing.
	assert.Positive(t, queued, "no step example needs a Kueue LocalQueue")
	assert.Positive(t, local, "no step example runs with --local")
}

func TestNeedsTrainerMinor(t *testing.T) {
	for _, tc := range []struct {
		file string
		want int
		ok   bool
	}{
		{"# Needs: Kubeflow Trainer v2.2 or later with its runtimes\napiVersion: v1\n", 2, true},
		{"# Needs: Kubeflow Trainer\n# v2.10.1 or later\n", 10, true},
		{"# Needs: a cluster\nkind: X\n# Kubeflow Trainer v2.2 or later\n", 0, false},
	} {
		got, ok := NeedsTrainerMinor([]byte(tc.file))
		assert.Equal(t, tc.ok, ok, tc.file)
		assert.Equal(t, tc.want, got, tc.file)
	}
}
