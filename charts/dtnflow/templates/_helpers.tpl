{{/* The chart's name, possibly overridden. */}}
{{- define "dtnflow.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The full name: the release name, with the chart name unless it already holds it. */}}
{{- define "dtnflow.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels on every object of the chart. */}}
{{- define "dtnflow.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "dtnflow.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: dtnflow
{{- end }}

{{/* Labels that select the manager's pods (never change them: Deployment selectors are immutable). */}}
{{- define "dtnflow.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dtnflow.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: manager
{{- end }}

{{/* The manager's ServiceAccount name. */}}
{{- define "dtnflow.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "dtnflow.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* image <values.image> <chart> → repository:tag, the tag defaulting to the appVersion. */}}
{{- define "dtnflow.image" -}}
{{- $image := index . 0 }}{{- $chart := index . 1 }}
{{- printf "%s:%s" $image.repository (default $chart.AppVersion $image.tag) }}
{{- end }}
