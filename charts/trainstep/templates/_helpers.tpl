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
What the schema cannot say: that one face at least is on, that the Argo face has a namespace
(--set argo.namespaces=null drops the list), and that Argo's controller namespace is listed only
when asked for (argo.pluginInControllerNamespace); each message names the values to set.
*/}}
{{- define "trainstep.validate" -}}
{{- if not (or .Values.argo.enabled .Values.tekton.enabled) -}}
{{- fail "\n\ntrainstep installs one face or both, and none is on: set argo.enabled=true (Argo Workflows: the executor plugin in each of argo.namespaces) and/or tekton.enabled=true (Tekton Pipelines: the custom task controller in the release's namespace). charts/trainstep/README.md says why neither is on by default." -}}
{{- end -}}
{{- if and .Values.argo.enabled (not .Values.argo.namespaces) -}}
{{- fail "\n\nthe Argo face is on but argo.namespaces names no namespace: set it to the namespaces that run workflows with trainstep steps (argo.namespaces={ml})." -}}
{{- end -}}
{{- if and .Values.argo.enabled (not .Values.argo.pluginInControllerNamespace) (has .Values.argo.controllerNamespace .Values.argo.namespaces) -}}
{{- fail (printf "\n\nargo.namespaces lists %[1]s, Argo's controller namespace (argo.controllerNamespace): Argo adds a plugin found there to the agent pod of every workflow in every namespace, and looks up its ServiceAccount in the workflow's namespace, so a workflow in any namespace without it could no longer run an HTTP or plugin template. Either list in argo.namespaces only the namespaces your workflows run in (not %[1]s), or set argo.pluginInControllerNamespace=true and list in argo.namespaces every namespace whose workflows use HTTP or plugin templates (each gets the plugin's ServiceAccount and token Secret). If Argo's controller runs in another namespace, set argo.controllerNamespace to it." .Values.argo.controllerNamespace) -}}
{{- end -}}
{{- if and .Values.argo.enabled .Values.argo.pluginInControllerNamespace (not .Values.argo.controllerNamespace) -}}
{{- fail "\n\nargo.pluginInControllerNamespace is on but argo.controllerNamespace is empty: set it to the namespace Argo's workflow-controller runs in (argo.controllerNamespace=argo)." -}}
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

{{/*
The Service Prometheus scrapes a part's /metrics through (port metrics, 8080), and its
prometheus-operator ServiceMonitor when metrics.serviceMonitor.enabled. Both replicas are
scraped: the one that leads counts the steps, the other serves none of their series.
*/}}
{{- define "trainstep.metricsService" -}}
{{- $root := index . 0 -}}
{{- $part := index . 1 -}}
{{- $name := include "trainstep.partName" (list $root $part) -}}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ $name }}-metrics
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "trainstep.partLabels" (list $root $part) | nindent 4 }}
spec:
  selector:
    {{- include "trainstep.selectorLabels" (list $root $part) | nindent 4 }}
  ports:
    - name: metrics
      port: 8080
      targetPort: metrics
{{- $sm := $root.Values.metrics.serviceMonitor }}
{{- if $sm.enabled }}
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "trainstep.partLabels" (list $root $part) | nindent 4 }}
    {{- with $sm.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  selector:
    matchLabels:
      {{- include "trainstep.selectorLabels" (list $root $part) | nindent 6 }}
  namespaceSelector:
    matchNames: [{{ $root.Release.Namespace }}]
  endpoints:
    - port: metrics
      path: /metrics
      {{- with $sm.interval }}
      interval: {{ . }}
      {{- end }}
{{- end }}
{{- end -}}
