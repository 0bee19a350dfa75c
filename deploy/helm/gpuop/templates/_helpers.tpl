{{/* Labels every object of the release carries. */}}
{{- define "gpuop.labels" -}}
app.kubernetes.io/name: gpuop
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The gpuop image: operator.repository/image:version when the image is gpuop's (its name
contains "gpuop"), else gpuop:<appVersion>; the operator passes the same reference to every
operand as --operand-image. */}}
{{- define "gpuop.image" -}}
{{- $o := .Values.operator -}}
{{- $name := "gpuop" -}}
{{- $repo := "" -}}
{{- if contains "gpuop" ($o.image | default "") -}}
{{- $name = $o.image -}}
{{- $repo = $o.repository | default "" -}}
{{- end -}}
{{- $tag := $o.version | default .Chart.AppVersion -}}
{{- if not (contains "gpuop" ($o.image | default "")) -}}
{{- $tag = .Chart.AppVersion -}}
{{- end -}}
{{- if $repo -}}{{ printf "%s/%s:%s" $repo $name $tag }}{{- else -}}{{ printf "%s:%s" $name $tag }}{{- end -}}
{{- end -}}

{{/* A values section without its empty entries ("", [], {}), as the ClusterPolicy leaves them
out; false and 0 stay. */}}
{{- define "gpuop.compact" -}}
{{- $out := dict -}}
{{- range $k, $v := . -}}
{{- if not (or (and (kindIs "string" $v) (eq $v "")) (and (kindIs "slice" $v) (eq (len $v) 0)) (and (kindIs "map" $v) (eq (len $v) 0)) (kindIs "invalid" $v)) -}}
{{- $_ := set $out $k $v -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}
