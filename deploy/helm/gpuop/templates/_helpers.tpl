{{/* Labels every object of the release carries. */}}
{{- define "gpuop.labels" -}}
app.kubernetes.io/name: gpuop
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* An image reference from repository, image and version (dict "repo" "image" "version"
"key" "local"), checked: a reference without a registry (its first path component names no host:
no "." or ":" in it, not "localhost") fails the install with what to set, unless "local" (the
image is already on every node); NVIDIA's operator image is refused, since it does not run
gpuop. "key" is the values section named in the messages. */}}
{{- define "gpuop.imageRef" -}}
{{- $ref := .image -}}
{{- if .repo }}{{ $ref = printf "%s/%s" (trimSuffix "/" .repo) .image }}{{ end -}}
{{- if not (regexMatch "(:[^/]+|@sha256:[0-9a-f]+)$" $ref) }}{{ $ref = printf "%s:%v" $ref .version }}{{ end -}}
{{- $first := first (splitList "/" $ref) -}}
{{- $registry := and (contains "/" $ref) (or (contains "." $first) (contains ":" $first) (eq $first "localhost")) -}}
{{- if and (not $registry) (not .local) -}}
{{- fail (printf "%s.repository is not set: the image \"%s\" names no registry, so the nodes cannot pull it. Push gpuop's image (make image; docs/install.md) and set %s.repository to its registry and path (--set %s.repository=registry.example.com/gpuop), or set operator.localImage=true when the image is already on every node" .key $ref .key .key) -}}
{{- end -}}
{{- if regexMatch "^nvcr\\.io/nvidia/gpu-operator[:@]" $ref -}}
{{- fail (printf "%s: \"%s\" is NVIDIA's operator image, which does not run gpuop: set %s.repository and %s.image to gpuop's image (docs/install.md)" .key $ref .key .key) -}}
{{- end -}}
{{- $ref -}}
{{- end -}}

{{/* The operator's image: operator.repository/image:version (version: the chart's appVersion
when empty). */}}
{{- define "gpuop.image" -}}
{{- $o := .Values.operator -}}
{{- include "gpuop.imageRef" (dict "repo" ($o.repository | default "") "image" ($o.image | default "gpuop") "version" ($o.version | default .Chart.AppVersion) "key" "operator" "local" $o.localImage) -}}
{{- end -}}

{{/* The operands' image (every operand but the driver; the operator's --operand-image): the
operands section, each key empty taking the operator's. */}}
{{- define "gpuop.operandImage" -}}
{{- $o := .Values.operator -}}
{{- $p := .Values.operands | default dict -}}
{{- $key := "operands" -}}
{{- if not (or $p.repository $p.image $p.version) }}{{ $key = "operator" }}{{ end -}}
{{- include "gpuop.imageRef" (dict "repo" ($p.repository | default $o.repository | default "") "image" ($p.image | default $o.image | default "gpuop") "version" ($p.version | default $o.version | default .Chart.AppVersion) "key" $key "local" $o.localImage) -}}
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

{{/* The pod settings of the hook Jobs (templates/hooks.yaml): non-root, the operator's pull
secrets, node selector and tolerations. */}}
{{- define "gpuop.hookPod" -}}
{{- $o := .Values.operator -}}
restartPolicy: OnFailure
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  seccompProfile: {type: RuntimeDefault}
{{- with $o.imagePullSecrets }}
imagePullSecrets:
{{- range . }}
{{- if kindIs "string" . }}
- name: {{ . }}
{{- else }}
- {{ toYaml . | nindent 2 | trim }}
{{- end }}
{{- end }}
{{- end }}
{{- with $o.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $o.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
