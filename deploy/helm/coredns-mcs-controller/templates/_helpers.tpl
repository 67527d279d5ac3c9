{{/*
The objects' name: mcs-controller, as deploy/controller names them, unless
fullnameOverride renames them.
*/}}
{{- define "mcs.fullname" -}}
{{- .Values.fullnameOverride | default "mcs-controller" | trunc 63 | trimSuffix "-" -}}
{{- end }}

{{/*
What selects the controller's pods: the overlay's label alone, so that the
Service, the budget, the spread and the NetworkPolicy select the same pods
whichever way it was installed.
*/}}
{{- define "mcs.selectorLabels" -}}
app.kubernetes.io/name: mcs-controller
{{- end }}

{{/*
Every object's labels: the overlay's two, and Helm's own, which say which
release made it.
*/}}
{{- define "mcs.labels" -}}
{{ include "mcs.selectorLabels" . }}
app.kubernetes.io/part-of: coredns-mcs
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* The image by digest when one is given, which no push can move, else by tag. */}}
{{- define "mcs.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/* The replicas: one per shard with shards, else replicas. */}}
{{- define "mcs.replicas" -}}
{{- if .Values.shards.enabled -}}
{{ .Values.shards.count }}
{{- else -}}
{{ .Values.replicas }}
{{- end -}}
{{- end }}
