package generate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// make generate rewrites what lies between a block's markers, and the text before a one-line
// marker, from the claims, keeping the marker's indentation and everything else of the file.
func TestRewriteBlocksMakesEachBlockFromTheClaims(t *testing.T) {
	for _, tc := range []struct {
		name, path, in, want string
	}{{
		name: "a YAML field on one line, indented",
		path: "Chart.yaml",
		in:   "name: x\nversion: 0.1.0 # generated: chart-version\nannotations:\n  workflows.argoproj.io/version: '>= v1.0' # generated: argo-plugin-version\n",
		want: "name: x\nversion: 0.3.0 # generated: chart-version\nannotations:\n  workflows.argoproj.io/version: '>= v3.6.12' # generated: argo-plugin-version\n",
	}, {
		name: "a Markdown block, its old text replaced",
		path: "README.md",
		in:   "# t\n\n<!-- generated: install-helm -->\nold\ntext\n<!-- end: install-helm -->\n\nafter\n",
		want: "# t\n\n<!-- generated: install-helm -->\n```sh\nhelm install trainstep dist/trainstep-0.3.0.tgz -n trainstep-system --create-namespace --set argo.enabled=true\n```\n<!-- end: install-helm -->\n\nafter\n",
	}, {
		name: "an example's needs, from its features and engines",
		path: "x.yaml",
		in:   "# A step.\n# generated: needs xgboost pod argo-plugins\n# end: needs\n#   executor run -f x.yaml\n",
		want: "# A step.\n# generated: needs xgboost pod argo-plugins\n" +
			"# Needs: Kubeflow Trainer v2.2 or later with its stock runtimes (the xgboost-distributed runtime is\n" +
			"# v2.2's; the pod block needs v2.1), Argo Workflows v3.6.12 or later with ARGO_EXECUTOR_PLUGINS=true\n" +
			"# on its controller.\n# end: needs\n#   executor run -f x.yaml\n",
	}, {
		name: "only features the oldest release has",
		path: "x.yaml",
		in:   "# generated: needs torch kueue\n# end: needs\n",
		want: "# generated: needs torch kueue\n# Needs: Kubeflow Trainer v2.0.1 or later with its stock runtimes (torch-distributed), Kueue with\n" +
			"# its TrainJob integration on (proved on Kueue v0.17.0).\n# end: needs\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := rewriteBlocks(tc.path, []byte(tc.in), testClaims())
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
			again, err := rewriteBlocks(tc.path, got, testClaims())
			require.NoError(t, err)
			assert.Equal(t, string(got), string(again), "a second make generate changes nothing")
		})
	}
}

// A block make generate cannot make is refused with where it is and what to do.
func TestRewriteBlocksRefusesWhatItCannotMake(t *testing.T) {
	for _, tc := range []struct {
		name, path, in, wantErr string
	}{
		{"no end line", "docs/cli.md", "x\n<!-- generated: chart-needs -->\ntext\n", `docs/cli.md:2: the generated block "chart-needs" has no end line "<!-- end: chart-needs -->"`},
		{"an unknown block", "a.yaml", "k: v # generated: no-such\n", `a.yaml:1: no generated block is named "no-such"`},
		{"many lines on one", "docs/cli.md", "x <!-- generated: install-helm -->\n", `docs/cli.md:1: block install-helm makes several lines`},
		{"an unknown feature", "a.yaml", "# generated: needs spark\n# end: needs\n", `"spark" is neither a Trainer feature`},
		{"arguments to a block that takes none", "docs/cli.md", "<!-- generated: chart-needs x -->\n<!-- end: chart-needs -->\n", `takes no arguments`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rewriteBlocks(tc.path, []byte(tc.in), testClaims())
			assert.ErrorContains(t, err, tc.wantErr)
		})
	}
}
