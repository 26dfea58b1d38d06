package argoharness

import (
	"fmt"
	"strconv"
	"strings"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
)

// StepWorkflow is a one-step Workflow (generateName prefix-) whose plugin template runs step (the
// trainstep step document, unindented), declaring outputs as supplied output parameters so
// the plugin fills them.
func StepWorkflow(prefix, step string, outputs ...string) string {
	return RetriedStepWorkflow(prefix, step, 0, outputs...)
}

// RetriedStepWorkflow is StepWorkflow whose template has a retryStrategy of retries attempts
// after the first (none when 0), with the plugin's attempt "{{retries}}" as plugin/argo/README.md
// requires then.
func RetriedStepWorkflow(prefix, step string, retries int, outputs ...string) string {
	var params strings.Builder
	for _, o := range outputs {
		fmt.Fprintf(&params, "          - {name: %s, valueFrom: {supplied: {}}}\n", o)
	}
	declared := ""
	if params.Len() > 0 {
		declared = "      outputs:\n        parameters:\n" + params.String()
	}
	retry, attempt := "", ""
	if retries > 0 {
		retry = fmt.Sprintf("      retryStrategy: {limit: \"%d\"}\n", retries)
		attempt = "          attempt: \"{{retries}}\"\n"
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
%s%s      plugin:
        trainstep:
          key: "{{node.name}}"
%s%s
`, prefix, retry, declared, attempt, indent(step, "          "))
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

// PluginNode is the Workflow's plugin node, nil before the controller made it; of a retried
// step's, the last attempt's (Argo names them <retry node>(0), (1), ...).
func PluginNode(wf *wfv1.Workflow) *wfv1.NodeStatus {
	var last *wfv1.NodeStatus
	for _, n := range wf.Status.Nodes {
		if n.Type == wfv1.NodeTypePlugin && (last == nil || attemptOf(n.Name) > attemptOf(last.Name)) {
			last = &n
		}
	}
	return last
}

// attemptOf is the attempt a node's name ends in ("wf(2)": 2), 0 when it names none.
func attemptOf(name string) int {
	open := strings.LastIndex(name, "(")
	if open < 0 || !strings.HasSuffix(name, ")") {
		return 0
	}
	n, err := strconv.Atoi(name[open+1 : len(name)-1])
	if err != nil {
		return 0
	}
	return n
}
