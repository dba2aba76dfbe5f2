{{/* The chart's name and the release's full name, cut to DNS label size. */}}
{{- define "switchboard.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "switchboard.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "switchboard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "switchboard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "switchboard.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "switchboard.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "switchboard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "switchboard.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The config file: values.config with the settings the chart owns. */}}
{{- define "switchboard.config" -}}
{{- $cfg := deepCopy .Values.config -}}
{{- $server := default dict (get $cfg "server") -}}
{{- $_ := set $server "listen" (printf "0.0.0.0:%v" .Values.service.targetPort) -}}
{{- $_ := set $server "drain_timeout" (printf "%ds" (int .Values.drainTimeoutSeconds)) -}}
{{- $_ := set $cfg "server" $server -}}
{{- toYaml $cfg -}}
{{- end -}}
