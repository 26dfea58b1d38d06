{{/*
The image every face runs: repository@digest when a digest is given (a release pins it),
else repository:tag.
*/}}
{{- define "trainstep.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}
{{- end -}}
