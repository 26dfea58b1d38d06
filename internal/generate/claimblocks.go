package generate

import (
	"fmt"
	"slices"
	"strings"
	"text/template"
)

// blockMaker makes one generated block from the claims and the marker's arguments.
type blockMaker func(c Claims, args []string) (string, error)

// blockMakers are the generated blocks by name: what each claims, written once.
var blockMakers = map[string]blockMaker{
	// One-line blocks: YAML fields.
	"chart-version":       text(`version: {{.ChartVersion}}`),
	"chart-kube-version":  text(`kubeVersion: ">={{.Kubernetes.MinMinor}}.0-0"`),
	"argo-plugin-version": text(`workflows.argoproj.io/version: '>= {{.Argo.Min}}'`),
	"task-version":        text(`app.kubernetes.io/version: "{{.ChartVersion}}"`),
	"task-tekton-version": text(`tekton.dev/pipelines.minVersion: "{{trimv .Tekton.Min}}"`),

	// YAML comments.
	"needs": needs,
	"tekton-kustomize-needs": text(`# Needs Tekton Pipelines {{.Tekton.Min}} or later (the CustomRun CRD; proved on
# {{.Tekton.List}}) and Kubeflow Trainer {{.Trainer.Min}} or later installed (docs/install.md).`),

	// Markdown.
	"chart-needs": text(`Needs Kubernetes {{.Kubernetes.MinMinor}} or later and Kubeflow Trainer {{.Trainer.Min}} or later; the Argo face
needs Argo Workflows {{.Argo.Min}} or later, the Tekton face Tekton Pipelines {{.Tekton.Min}} or later (each
release proved: [Works with](../../README.md#works-with)).`),
	"argo-needs": text(`Prerequisites ([docs/install.md](../../docs/install.md), with commands): Kubeflow Trainer {{.Trainer.Min}}
or later (CRDs and runtimes) and Argo Workflows {{.Argo.Min}} or later (proved on {{.Argo.List}})
with executor plugins turned on: the controller's env ` + "`ARGO_EXECUTOR_PLUGINS=true`" + `, with argo-helm
the value ` + "`controller.extraEnv`" + ` ([docs/install.md](../../docs/install.md#prerequisites)).`),
	"tekton-needs": text(`Needs Tekton Pipelines {{.Tekton.Min}} or later (proved on {{.Tekton.List}}; no feature
flag: custom tasks are on by default) and Kubeflow Trainer {{.Trainer.Min}} or later with its runtimes
([docs/install.md](../../docs/install.md), with commands).`),
	"install-kubernetes": text(`**Kubernetes** {{.Kubernetes.MinMinor}} or later: proved on {{.Kubernetes.List}} (the chart's
` + "`kubeVersion`" + ` says the same). The Argo face's admission policy is a ` + "`ValidatingAdmissionPolicy`" + `,
GA since Kubernetes 1.30.`),
	"install-trainer": text("```sh\n" + `VERSION={{.Trainer.Max}}
kubectl apply --server-side -k "https://github.com/kubeflow/trainer.git/manifests/overlays/manager?ref=${VERSION}"
kubectl wait --for=condition=Available -n kubeflow-system deployment/kubeflow-trainer-controller-manager --timeout=5m
kubectl apply --server-side -k "https://github.com/kubeflow/trainer.git/manifests/overlays/runtimes?ref=${VERSION}"
` + "```" + `

trainstep is proved on Trainer {{.Trainer.List}}, but a feature may need a
newer one than {{.Trainer.Min}} (the XGBoost runtime of the examples needs v2.2): the
[feature table](#which-trainer-release-a-feature-needs) says which.`),
	"install-engines": text(`- **Argo Workflows** {{.Argo.Min}} or later (proved on {{.Argo.List}}), with
  executor plugins turned on: the workflow-controller needs the env ` + "`ARGO_EXECUTOR_PLUGINS=true`" + `
  (or the flag ` + "`--executor-plugins`" + `). Installed with Argo's Helm chart
  ([argo-helm](https://github.com/argoproj/argo-helm/tree/main/charts/argo-workflows)), give it
  these values (` + "`helm upgrade … -f plugins.yaml`" + `):
  ` + "```yaml" + `
  controller:
    extraEnv:
      - name: ARGO_EXECUTOR_PLUGINS
        value: "true"
  ` + "```" + `
  With Argo's own manifests (quick start: the Deployment ` + "`workflow-controller`" + ` in ` + "`argo`" + `;
  argo-helm names it ` + "`<release>-argo-workflows-workflow-controller`" + ` and undoes a hand edit at its
  next upgrade): ` + "`kubectl set env -n argo deployment/workflow-controller ARGO_EXECUTOR_PLUGINS=true`" + `
  ([Argo executor plugins](https://argo-workflows.readthedocs.io/en/latest/executor_plugins/)).
- **Tekton Pipelines** {{.Tekton.Min}} or later (proved on {{.Tekton.List}}). No feature
  flag: custom tasks are on by default ([Tekton custom tasks](https://tekton.dev/docs/pipelines/customruns/)).`),
	"install-crane": text("[`crane`](https://github.com/google/go-containerregistry/blob/main/cmd/crane/README.md)" + `
pushes an OCI layout to a registry with its digest kept, no container engine needed:
` + "`go install github.com/google/go-containerregistry/cmd/crane@{{.Crane}}`" + `, the
go-containerregistry release trainstep writes its image with.`),
	"install-release": text("```sh\n" + `make release VERSION={{.Release}} RELEASE_REPOSITORY=registry.example.com/trainstep   # dist/: the image, install files, chart
crane push dist/image/oci registry.example.com/trainstep:{{.Release}}   # both platforms, the digest kept
kubectl apply -f dist/install-argo.yaml                 # or dist/install-tekton.yaml, or the chart below
` + "```"),
	"install-helm": text("```sh\n" + `helm install trainstep dist/trainstep-{{.ChartVersion}}.tgz -n trainstep-system --create-namespace --set argo.enabled=true
` + "```"),
	"trainer-features": trainerFeatureTable,
}

// text is a block made by one template of the claims.
func text(tmpl string) blockMaker {
	t := template.Must(template.New("").Funcs(template.FuncMap{
		"trimv": func(s string) string { return strings.TrimPrefix(s, "v") },
	}).Option("missingkey=error").Parse(tmpl))
	return func(c Claims, args []string) (string, error) {
		if len(args) > 0 {
			return "", fmt.Errorf("takes no arguments, got %q", args)
		}
		var b strings.Builder
		if err := t.Execute(&b, c); err != nil {
			return "", err
		}
		return b.String(), nil
	}
}

// trainerFeature is a row of docs/install.md's table of what needs which Trainer release, and
// what the examples that use it need.
type trainerFeature struct {
	// key names it in a `needs` block; "" for rows no example names.
	key string
	// what is the feature; needs the release it needs (empty: the oldest proved) and how;
	// older what happens on an older Trainer.
	what, needs, how, older string
	// example is what an example's header says of it, after "with its stock runtimes (".
	example string
}

// trainerFeatures is what each feature needs of the Trainer: the one source of the feature table
// and of the examples' headers.
var trainerFeatures = []trainerFeature{
	{key: "torch", what: "the torch, DeepSpeed, MLX/MPI, TorchTune and custom trainers", how: "",
		older: "v2.0.0's runtimes carry no framework label: discovery finds none (not proved)", example: "torch-distributed"},
	{key: "xgboost", what: "`framework: xgboost` and `jax` (the examples)", needs: "v2.2", how: " (`xgboost-distributed`, `jax-distributed`)",
		older: "refused at plan time: no runtime", example: "the xgboost-distributed runtime is v2.2's"},
	{key: "pod", what: "the `pod` block (volumes, secret env, `envFrom`, scheduling)", needs: "v2.1", how: " (`spec.podTemplateOverrides`); v2.2+ `spec.runtimePatches`",
		older: "v2.0: refused, `pod: Forbidden`", example: "the pod block needs v2.1"},
	{what: "progress, `metrics`, `metric-<name>`, `progress-percentage`", needs: "v2.2", how: " with the `TrainJobStatus` gate on",
		older: "empty, and the step says reporting is off"},
	{what: "the Trainer also stops a job at `timeout` (`activeDeadlineSeconds`)", needs: "v2.2",
		older: "trainstep alone deletes the job at `timeout`"},
	{what: "a Job the apiserver refuses fails the step at once", needs: "v2.2", how: " (JobSet v0.11)",
		older: "it fails at `startTimeout`"},
	{key: "torchtune", what: "TorchTune runtimes make their own PVC", needs: "v2.2",
		older: "create the PVC the runtime names first", example: "torchtune-llama3.2-1b makes its own PVC from v2.2"},
	{what: "the Argo sidecar caches only its workflow's pods", needs: "v2.1",
		older: "it caches every JobSet pod of the namespace"},
	{what: "MultiKueue, trainstep on the manager cluster", needs: "v2.3.0", older: "not supported"},
}

// need is the release a feature needs: its own, or the oldest proved.
func (f trainerFeature) need(c Claims) string {
	if f.needs == "" {
		return c.Trainer.Min()
	}
	return f.needs
}

func trainerFeatureTable(c Claims, args []string) (string, error) {
	if len(args) > 0 {
		return "", fmt.Errorf("takes no arguments, got %q", args)
	}
	var b strings.Builder
	b.WriteString("| feature | needs | on an older Trainer |\n|---|---|---|\n")
	for _, f := range trainerFeatures {
		if !provedMinor(c.Trainer, f.need(c)) {
			return "", fmt.Errorf("%s needs Trainer %s, which docs/compatibility.json does not prove", f.what, f.need(c))
		}
		fmt.Fprintf(&b, "| %s | %s%s | %s |\n", f.what, f.need(c), f.how, f.older)
	}
	return b.String(), nil
}

// provedMinor says whether v (v2.2, or v2.3.0) is, or is the minor of, a release s proves.
func provedMinor(s System, v string) bool {
	return slices.ContainsFunc(s.Proved, func(p string) bool { return p == v || minor(p) == v })
}

// engines are what a `needs` block may name beside Trainer features.
var engines = map[string]string{
	"argo":         "Argo Workflows {{.Argo.Min}} or later",
	"argo-plugins": "Argo Workflows {{.Argo.Min}} or later with ARGO_EXECUTOR_PLUGINS=true on its controller",
	"tekton":       "Tekton Pipelines {{.Tekton.Min}} or later",
	"kueue":        "Kueue with its TrainJob integration on (proved on Kueue {{.Kueue}})",
}

// needs is an example's "# Needs: …" sentence from what it uses: Trainer features (keys of
// trainerFeatures) and engines. The Trainer release it names is the newest any feature needs.
func needs(c Claims, args []string) (string, error) {
	trainer := c.Trainer.Min()
	var why, rest []string
	for _, a := range args {
		if e, ok := engines[a]; ok {
			s, err := text(e)(c, nil)
			if err != nil {
				return "", err
			}
			rest = append(rest, s)
			continue
		}
		i := slices.IndexFunc(trainerFeatures, func(f trainerFeature) bool { return f.key == a && a != "" })
		if i < 0 {
			return "", fmt.Errorf("%q is neither a Trainer feature (trainerFeatures) nor an engine (argo, argo-plugins, tekton, kueue)", a)
		}
		f := trainerFeatures[i]
		if compareVersions(f.need(c), trainer) > 0 {
			trainer = f.need(c)
		}
		why = append(why, f.example)
	}
	sentence := "Needs: Kubeflow Trainer " + trainer + " or later with its stock runtimes (" + strings.Join(why, "; ") + ")"
	if len(rest) > 0 {
		sentence += ", " + strings.Join(rest, ", ")
	}
	return wrapComment(sentence+".", 100), nil
}

// wrapComment writes s as YAML comment lines of at most width characters.
func wrapComment(s string, width int) string {
	var b strings.Builder
	line := "#"
	for _, w := range strings.Fields(s) {
		if len(line)+1+len(w) > width && line != "#" {
			b.WriteString(line + "\n")
			line = "#"
		}
		line += " " + w
	}
	b.WriteString(line + "\n")
	return b.String()
}
