{{/*
The chart's name, and the release's full name every object name starts with: two releases make
distinct cluster-scoped objects (ClusterRoles, their bindings, the admission policy). A release
whose name contains the chart's ("trainstep") is that name alone, so `helm install trainstep`
makes the names manifests/ use.
*/}}
{{- define "trainstep.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "trainstep.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The name of one part: the release's full name and a suffix, within the 63 characters a label
value (and so a Deployment's name) may have. The suffix is kept whole: truncating it would give
two parts one name.
*/}}
{{- define "trainstep.partName" -}}
{{- $root := index . 0 -}}
{{- $suffix := index . 1 -}}
{{- printf "%s-%s" (include "trainstep.fullname" $root | trunc (int (sub 62 (len $suffix))) | trimSuffix "-") $suffix -}}
{{- end -}}

{{/*
Argo's names, which the chart cannot choose: Argo finds the plugin's ConfigMap, the
ServiceAccount of its sidecar and that ServiceAccount's token Secret by the plugin's name
("trainstep", the key workflows write: plugin: {trainstep: ...}). The example workflows run as
trainstep-workflow. So a second release with the Argo face in a namespace of the first is
refused by name, as it must be: Argo loads one plugin per name.
*/}}
{{- define "trainstep.argoPlugin" -}}trainstep-executor-plugin{{- end -}}
{{- define "trainstep.argoWorkflowSA" -}}trainstep-workflow{{- end -}}

{{- define "trainstep.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Labels: every object's, and the selector of one part (part: argo-janitor, tekton-controller).
*/}}
{{- define "trainstep.labels" -}}
helm.sh/chart: {{ include "trainstep.chart" . }}
app.kubernetes.io/name: {{ include "trainstep.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: trainstep
{{- end -}}

{{- define "trainstep.partLabels" -}}
{{- $root := index . 0 -}}
{{ include "trainstep.labels" $root }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "trainstep.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "trainstep.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/*
The image every face runs: repository@digest when a digest is given (a release pins it), else
repository:tag, the tag defaulting to the chart's appVersion.
*/}}
{{- define "trainstep.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/*
What the schema cannot say: that one face at least is on, and that the Argo face has a namespace
(--set argo.namespaces=null drops the list); each message names the values to set.
*/}}
{{- define "trainstep.validate" -}}
{{- if not (or .Values.argo.enabled .Values.tekton.enabled) -}}
{{- fail "\n\ntrainstep installs one face or both, and none is on: set argo.enabled=true (Argo Workflows: the executor plugin in each of argo.namespaces) and/or tekton.enabled=true (Tekton Pipelines: the custom task controller in the release's namespace). charts/trainstep/README.md says why neither is on by default." -}}
{{- end -}}
{{- if and .Values.argo.enabled (not .Values.argo.namespaces) -}}
{{- fail "\n\nthe Argo face is on but argo.namespaces names no namespace: set it to the namespaces that run workflows with trainstep steps (argo.namespaces={argo})." -}}
{{- end -}}
{{- end -}}

{{/*
The pod spec fields every Deployment of the chart takes from its part's values (janitor,
controller): where it is scheduled, who pulls its image, as whom it runs.
*/}}
{{- define "trainstep.podPlacement" -}}
{{- $root := index . 0 -}}
{{- $part := index . 1 -}}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with $part.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $part.nodeSelector }}
nodeSelector:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with $part.tolerations }}
tolerations:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with $part.affinity }}
affinity:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with $part.podSecurityContext }}
securityContext:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
