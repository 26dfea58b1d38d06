package generate

// The Helm chart charts/trainstep is generated from manifests/, which stay the one source of
// truth: kustomize (through internal/release, the code of `kubectl apply -k`) builds each face,
// and every object becomes a template in which only what the chart's values set is replaced by
// a template expression (the namespace, the image, replicas, resources) and which is wrapped in
// the condition that turns it on. With the default values (values.yaml, generated from the same
// objects) the chart renders exactly what kustomize builds; test/e2e/image checks that with the
// real helm. Chart.yaml and templates/_helpers.tpl are written by hand.

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/internal/release"
)

// chartHeader starts every generated chart file.
const chartHeader = "# Generated from manifests/%s by `make generate` (internal/generate/chart.go). Do not edit by hand:\n" +
	"# change manifests/ and run `make generate`.\n"

// faceValues is where each face's settings live in values.yaml.
var faceValues = map[string]string{"argo": "argo", "tekton": "tekton"}

// Placeholders set in an object before it is written, replaced by template expressions after.
var (
	placeholder = regexp.MustCompile(`(?m)^( *)(\S+): __(NS|IMAGE|REPLICAS|RESOURCES)_([a-zA-Z.]*)__$`)
	rbacKinds   = map[string]bool{"Role": true, "RoleBinding": true, "ClusterRole": true, "ClusterRoleBinding": true}
)

// chartObjects are the objects of manifests/<face>, as kustomize builds them.
func chartObjects(root, face string) ([]map[string]any, error) {
	stream, err := release.Kustomize(root, face)
	if err != nil {
		return nil, err
	}
	var objs []map[string]any
	for _, doc := range bytes.Split(stream, []byte("\n---\n")) {
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return nil, err
		}
		if obj != nil {
			objs = append(objs, obj)
		}
	}
	return objs, nil
}

// chartTemplate is templates/<face>.yaml: every object of manifests/<face>, templated.
func chartTemplate(face string) func(root string) ([]byte, error) {
	return func(root string) ([]byte, error) {
		objs, err := chartObjects(root, face)
		if err != nil {
			return nil, err
		}
		// The face's namespace: where kustomize put its namespaced objects.
		var ns string
		for _, obj := range objs {
			if s, _ := dig(obj, "metadata")["namespace"].(string); s != "" {
				ns = s
				break
			}
		}
		out := bytes.NewBufferString(fmt.Sprintf(chartHeader, face))
		for _, obj := range objs {
			key := faceValues[face]
			if err := templatize(obj, key, ns); err != nil {
				return nil, fmt.Errorf("manifests/%s: %s %s: %w", face, obj["kind"], nameOf(obj), err)
			}
			b, err := yaml.Marshal(obj)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(out, "{{- if %s }}\n---\n%s{{- end }}\n", condition(obj, key), expressions(b))
		}
		return out.Bytes(), nil
	}
}

// condition is what turns obj on: its face, and the part of the face it belongs to.
func condition(obj map[string]any, key string) string {
	conds := []string{".Values." + key + ".enabled"}
	kind, name := obj["kind"].(string), nameOf(obj)
	switch {
	case kind == "Namespace":
		conds = append(conds, ".Values."+key+".createNamespace")
	case strings.HasPrefix(name, "trainstep-argo-janitor"):
		conds = append(conds, ".Values."+key+".janitor.enabled")
	case strings.HasPrefix(kind, "ValidatingAdmissionPolicy"):
		conds = append(conds, ".Values."+key+".admissionPolicy.enabled")
	}
	if rbacKinds[kind] {
		conds = append(conds, ".Values.rbac.create")
	}
	if len(conds) == 1 {
		return conds[0]
	}
	return "and " + strings.Join(conds, " ")
}

// component is the values key of the workload obj is: janitor, plugin or controller.
func component(obj map[string]any, key string) string {
	switch name := nameOf(obj); {
	case strings.HasPrefix(name, "trainstep-argo-janitor"):
		return key + ".janitor"
	case obj["kind"] == "ConfigMap":
		return key + ".plugin"
	default:
		return key + ".controller"
	}
}

// templatize sets placeholders where values apply: the face's namespace, and in workloads the
// image, replicas and resources (in the Argo plugin's ConfigMap, inside its container YAML).
func templatize(obj map[string]any, key, ns string) error {
	nsValue := "__NS_" + key + "__"
	md, _ := obj["metadata"].(map[string]any)
	if obj["kind"] == "Namespace" {
		md["name"] = nsValue
	}
	if md["namespace"] != nil {
		md["namespace"] = nsValue
	}
	if subjects, ok := obj["subjects"].([]any); ok {
		for _, s := range subjects {
			if s, ok := s.(map[string]any); ok && s["namespace"] == ns {
				s["namespace"] = nsValue
			}
		}
	}
	comp := component(obj, key)
	if obj["kind"] == "Deployment" {
		spec, _ := obj["spec"].(map[string]any)
		spec["replicas"] = "__REPLICAS_" + comp + "__"
		containers, _ := dig(obj, "spec", "template", "spec")["containers"].([]any)
		for _, c := range containers {
			if c, ok := c.(map[string]any); ok {
				if err := templatizeContainer(c, comp); err != nil {
					return err
				}
			}
		}
	}
	data, _ := obj["data"].(map[string]any)
	if s, ok := data["sidecar.container"].(string); ok {
		var c map[string]any
		if err := yaml.Unmarshal([]byte(s), &c); err != nil {
			return err
		}
		if err := templatizeContainer(c, comp); err != nil {
			return err
		}
		b, err := yaml.Marshal(c)
		if err != nil {
			return err
		}
		data["sidecar.container"] = string(b)
	}
	return nil
}

func templatizeContainer(c map[string]any, comp string) error {
	if c["image"] != release.DevImage {
		return fmt.Errorf("container %v runs %v, not %s: the chart sets the image only where the manifests name %s", c["name"], c["image"], release.DevImage, release.DevImage)
	}
	c["image"] = "__IMAGE___"
	if c["resources"] == nil {
		return errors.New("container " + fmt.Sprint(c["name"]) + " sets no resources")
	}
	c["resources"] = "__RESOURCES_" + comp + "__"
	return nil
}

// expressions replaces the placeholders in a written object by template expressions.
func expressions(b []byte) []byte {
	return placeholder.ReplaceAllFunc(b, func(m []byte) []byte {
		g := placeholder.FindSubmatch(m)
		indent, field, what, path := string(g[1]), string(g[2]), string(g[3]), string(g[4])
		switch what {
		case "NS":
			return []byte(fmt.Sprintf("%s%s: {{ .Values.%s.namespace }}", indent, field, path))
		case "IMAGE":
			return []byte(fmt.Sprintf(`%s%s: {{ include "trainstep.image" . }}`, indent, field))
		case "REPLICAS":
			return []byte(fmt.Sprintf("%s%s: {{ .Values.%s.replicas }}", indent, field, path))
		default: // RESOURCES
			return []byte(fmt.Sprintf("%s%s:\n{{- toYaml .Values.%s.resources | nindent %d }}", indent, field, path, len(indent)+2))
		}
	})
}

// chartValues is values.yaml: the defaults are the manifests' own settings.
func chartValues(root string) ([]byte, error) {
	argo, err := chartObjects(root, "argo")
	if err != nil {
		return nil, err
	}
	tekton, err := chartObjects(root, "tekton")
	if err != nil {
		return nil, err
	}
	find := func(objs []map[string]any, kind, name string) map[string]any {
		for _, o := range objs {
			if o["kind"] == kind && nameOf(o) == name {
				return o
			}
		}
		return nil
	}
	janitor := find(argo, "Deployment", "trainstep-argo-janitor")
	plugin := find(argo, "ConfigMap", "trainstep-executor-plugin")
	controller := find(tekton, "Deployment", "trainstep-tekton-controller")
	if janitor == nil || plugin == nil || controller == nil {
		return nil, errors.New("manifests/ lack the janitor Deployment, the plugin ConfigMap or the Tekton controller Deployment the chart's values describe")
	}
	var sidecar map[string]any
	if err := yaml.Unmarshal([]byte(dig(plugin, "data")["sidecar.container"].(string)), &sidecar); err != nil {
		return nil, err
	}
	repo, tag, _ := strings.Cut(release.DevImage, ":")
	return []byte(fmt.Sprintf(valuesTemplate, repo, tag, namespaceOf(plugin),
		block(sidecar["resources"], 6), dig(janitor, "spec")["replicas"], block(containerOf(janitor)["resources"], 6),
		namespaceOf(controller), dig(controller, "spec")["replicas"], block(containerOf(controller)["resources"], 6))), nil
}

const valuesTemplate = `# Generated from manifests/ by ` + "`make generate`" + ` (internal/generate/chart.go): the defaults are the
# manifests' own settings, so with these values the chart renders what ` + "`kubectl apply -k manifests/<face>`" + `
# applies. Do not edit by hand: change manifests/ and run ` + "`make generate`" + `.

# The one image every face runs: repository:tag, or repository@digest when digest is set (a
# release's install files pin the digest; pass the same with --set image.digest=sha256:…).
image:
  repository: %s
  tag: %s
  digest: ""

# The Roles, ClusterRoles and bindings each face needs (off: bring your own, with the same rules).
rbac:
  create: true

# The Argo Workflows face (plugin/argo): the executor plugin's ConfigMap, its ServiceAccounts and
# their token Secrets, in the namespace that runs the workflows; Argo's controller needs
# ARGO_EXECUTOR_PLUGINS=true.
argo:
  enabled: true
  namespace: %s
  plugin:
    # The sidecar of each workflow's agent pod.
    resources:
%s
  # One per cluster: deletes TrainJobs whose Argo node finished after their agent pod was gone.
  janitor:
    enabled: true
    replicas: %v
    resources:
%s
  # Lets the plugin's ServiceAccount touch only TrainJobs labelled as the Argo face's (Kubernetes >= 1.30).
  admissionPolicy:
    enabled: true

# The Tekton face (plugin/tekton): the custom task controller for TrainStep CustomRuns.
tekton:
  enabled: true
  namespace: %s
  createNamespace: true
  controller:
    replicas: %v
    resources:
%s
`

// block is v as YAML, each line indented by n spaces, without the final newline.
func block(v any, n int) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	for i := range lines {
		lines[i] = strings.Repeat(" ", n) + lines[i]
	}
	return strings.Join(lines, "\n")
}

func dig(obj map[string]any, path ...string) map[string]any {
	for _, p := range path {
		obj, _ = obj[p].(map[string]any)
	}
	return obj
}

func containerOf(obj map[string]any) map[string]any {
	cs, _ := dig(obj, "spec", "template", "spec")["containers"].([]any)
	if len(cs) == 0 {
		return nil
	}
	c, _ := cs[0].(map[string]any)
	return c
}

func nameOf(obj map[string]any) string {
	s, _ := dig(obj, "metadata")["name"].(string)
	return s
}

func namespaceOf(obj map[string]any) string {
	s, _ := dig(obj, "metadata")["namespace"].(string)
	if obj["kind"] == "Namespace" {
		s = nameOf(obj)
	}
	return s
}
