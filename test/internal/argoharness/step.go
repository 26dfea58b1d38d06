package argoharness

import (
	"fmt"
	"strings"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
)

// StepWorkflow is a one-step Workflow (generateName prefix-) whose plugin template runs step (the
// trainstep step document, unindented), declaring outputs as supplied output parameters so
// the plugin fills them.
func StepWorkflow(prefix, step string, outputs ...string) string {
	var params strings.Builder
	for _, o := range outputs {
		fmt.Fprintf(&params, "          - {name: %s, valueFrom: {supplied: {}}}\n", o)
	}
	declared := ""
	if params.Len() > 0 {
		declared = "      outputs:\n        parameters:\n" + params.String()
	}
	return fmt.Sprintf(`
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: %s-}
spec:
  entrypoint: train
  serviceAccountName: trainstep-workflow
  templates:
    - name: train
%s      plugin:
        trainstep:
          key: "{{node.name}}"
%s
`, prefix, declared, indent(step, "          "))
}

// indent prefixes every non-empty line of s.
func indent(s, prefix string) string {
	lines := strings.Split(strings.Trim(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n")
}

// PluginNode is the Workflow's plugin node, nil before the controller made it.
func PluginNode(wf *wfv1.Workflow) *wfv1.NodeStatus {
	for _, n := range wf.Status.Nodes {
		if n.Type == wfv1.NodeTypePlugin {
			return &n
		}
	}
	return nil
}
