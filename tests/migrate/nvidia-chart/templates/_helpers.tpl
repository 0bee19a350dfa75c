{{- define "gpu-operator.labels" -}}
app.kubernetes.io/name: gpu-operator
helm.sh/chart: gpu-operator-{{ .Chart.Version }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}
