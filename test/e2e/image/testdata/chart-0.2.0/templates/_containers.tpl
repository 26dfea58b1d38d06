{{/*
Each face's container, as manifests/ have it, with what its values add: the image, resources, the
security context, GOMEMLIMIT (the Go runtime collects harder as the heap nears it: under the
memory limit), extra args after the chart's and extra env after the chart's. Every port a
container binds is in its args, so a reader of the pod sees them all.
*/}}

{{/* The Argo plugin's sidecar, the YAML Argo reads from the ConfigMap's sidecar.container. */}}
{{- define "trainstep.argoSidecar" -}}
{{- $v := .Values.argo.plugin -}}
name: {{ include "trainstep.argoPlugin" . }}
image: {{ include "trainstep.image" . }}
{{- with .Values.image.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
args:
  - argo-plugin
  - --addr=:7356
  - --metrics-addr=127.0.0.1:7357
{{- with $v.extraArgs }}
{{- toYaml . | nindent 2 }}
{{- end }}
env:
  # The namespace served and the one workflow watched, from the agent pod's own metadata.
  - name: POD_NAMESPACE
    valueFrom:
      fieldRef:
        fieldPath: metadata.namespace
  - name: ARGO_WORKFLOW_NAME
    valueFrom:
      fieldRef:
        fieldPath: metadata.labels['workflows.argoproj.io/workflow']
{{- with include "trainstep.goMemLimit" $v }}
{{- . | nindent 2 }}
{{- end }}
{{- with $v.extraEnv }}
{{- toYaml . | nindent 2 }}
{{- end }}
ports:
  - containerPort: 7356
{{- with $v.resources }}
resources:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.securityContext }}
securityContext:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The janitor's container. */}}
{{- define "trainstep.janitorContainer" -}}
{{- $v := .Values.argo.janitor -}}
- name: janitor
  image: {{ include "trainstep.image" . }}
  {{- with .Values.image.pullPolicy }}
  imagePullPolicy: {{ . }}
  {{- end }}
  args:
    - argo-janitor
    - --leader-elect
    - --log-format=json
    - --health-probe-bind-address=:8081
    - --metrics-bind-address=127.0.0.1:8080
  {{- with $v.extraArgs }}
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- $env := include "trainstep.goMemLimit" $v }}
  {{- if or $env $v.extraEnv }}
  env:
    {{- with $env }}
    {{- . | nindent 4 }}
    {{- end }}
    {{- with $v.extraEnv }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- end }}
  ports:
    - name: probes
      containerPort: 8081
  readinessProbe:
    httpGet:
      path: /readyz
      port: probes
  livenessProbe:
    httpGet:
      path: /healthz
      port: probes
  {{- with $v.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.securityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}

{{/* The Tekton controller's container. */}}
{{- define "trainstep.tektonContainer" -}}
{{- $v := .Values.tekton.controller -}}
- name: controller
  image: {{ include "trainstep.image" . }}
  {{- with .Values.image.pullPolicy }}
  imagePullPolicy: {{ . }}
  {{- end }}
  args:
    - tekton-controller
    - --leader-elect
    - --leader-election-namespace=$(POD_NAMESPACE)
    - --metrics-bind-address=:8080
    - --health-probe-bind-address=:8081
  {{- with $v.extraArgs }}
    {{- toYaml . | nindent 4 }}
  {{- end }}
  env:
    - name: POD_NAMESPACE
      valueFrom:
        fieldRef:
          fieldPath: metadata.namespace
    {{- with include "trainstep.goMemLimit" $v }}
    {{- . | nindent 4 }}
    {{- end }}
    {{- with $v.extraEnv }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  ports:
    - name: metrics
      containerPort: 8080
    - name: probes
      containerPort: 8081
  livenessProbe:
    httpGet:
      path: /healthz
      port: probes
    periodSeconds: 20
  readinessProbe:
    httpGet:
      path: /readyz
      port: probes
    periodSeconds: 10
  {{- with $v.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.securityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}

{{/* The GOMEMLIMIT env entry of a part, or nothing when it is unset. */}}
{{- define "trainstep.goMemLimit" -}}
{{- with .goMemLimit -}}
- name: GOMEMLIMIT
  value: {{ . | quote }}
{{- end -}}
{{- end -}}
