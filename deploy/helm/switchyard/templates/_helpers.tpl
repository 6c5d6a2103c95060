{{- define "switchyard.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "switchyard.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector of the console pods; the agent's adds component: agent. */}}
{{- define "switchyard.consoleSelector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: console
{{- end -}}

{{- define "switchyard.agentSelector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: agent
{{- end -}}

{{- define "switchyard.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The Secret the chart creates for the values given inline. */}}
{{- define "switchyard.secretName" -}}
{{ include "switchyard.fullname" . }}
{{- end -}}

{{- define "switchyard.databaseSecret" -}}
{{ .Values.database.existingSecret | default (include "switchyard.secretName" .) }}
{{- end -}}

{{- define "switchyard.bootstrapSecret" -}}
{{ .Values.bootstrapToken.existingSecret | default (include "switchyard.secretName" .) }}
{{- end -}}

{{/* True when the chart must create its Secret. */}}
{{- define "switchyard.createSecret" -}}
{{- if or (and .Values.database.url (not .Values.database.existingSecret)) (and .Values.bootstrapToken.value (not .Values.bootstrapToken.existingSecret)) -}}
true
{{- end -}}
{{- end -}}
