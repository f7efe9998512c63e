{{- define "sunk.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sunk.fullname" -}}
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

{{/* A component's name: the full name cut first, so that "-<suffix>" always fits in 63
characters (a Service name is a DNS label). Call with (dict "root" . "suffix" "operator"). */}}
{{- define "sunk.componentName" -}}
{{- $room := int (sub 62 (len .suffix)) -}}
{{- printf "%s-%s" (include "sunk.fullname" .root | trunc $room | trimSuffix "-") .suffix -}}
{{- end -}}

{{- define "sunk.operatorName" -}}
{{- include "sunk.componentName" (dict "root" . "suffix" "operator") -}}
{{- end -}}

{{- define "sunk.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sunk.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The chart's labels, then commonLabels (which never override them). */}}
{{- define "sunk.labels" -}}
{{- $own := include "sunk.ownLabels" . -}}
{{- $own }}
{{- $keys := fromYaml $own -}}
{{- range $key, $value := .root.Values.commonLabels }}
{{- if not (hasKey $keys $key) }}
{{ $key }}: {{ $value | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "sunk.ownLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{ include "sunk.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: sunk
{{- end -}}

{{/* The operator's ServiceAccount: its own name, or serviceAccount.name. */}}
{{- define "sunk.serviceAccountName" -}}
{{- .Values.operator.serviceAccount.name | default (include "sunk.operatorName" .) -}}
{{- end -}}

{{/* Image reference from {repository, tag, digest}; global.imageRegistry is prefixed. */}}
{{- define "sunk.image" -}}
{{- $img := .image -}}
{{- $registry := (.global | default dict).imageRegistry -}}
{{- $repo := $img.repository -}}
{{- if $registry }}{{ $repo = printf "%s/%s" (trimSuffix "/" $registry) $repo }}{{ end -}}
{{- if $img.digest -}}
{{- printf "%s@%s" $repo $img.digest -}}
{{- else if $img.tag -}}
{{- printf "%s:%s" $repo (toString $img.tag) -}}
{{- else -}}
{{- $repo -}}
{{- end -}}
{{- end -}}

{{- define "sunk.pullSecrets" -}}
{{- $secrets := concat (.Values.global.imagePullSecrets | default list) (.Values.imagePullSecrets | default list) -}}
{{- with $secrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* A Pod's tolerations: the given list, plus the node lock's (NoExecute) unless one of them
tolerates it already. A NoExecute taint evicts what does not tolerate it, so a values file
that replaces the list cannot lose it. */}}
{{- define "sunk.tolerations" -}}
{{- $tols := . | default list -}}
{{- $covered := false -}}
{{- range $tols -}}
{{- $key := .key | default "" -}}
{{- $keyOk := or (eq $key "sunk.coreweave.com/lock") (and (eq $key "") (eq (.operator | default "") "Exists")) -}}
{{- if and $keyOk (has (.effect | default "") (list "" "NoExecute")) -}}
{{- $covered = true -}}
{{- end -}}
{{- end -}}
{{- if not $covered -}}
{{- $tols = append $tols (dict "key" "sunk.coreweave.com/lock" "operator" "Exists" "effect" "NoExecute") -}}
{{- end -}}
tolerations:
  {{- toYaml $tols | nindent 2 }}
{{- end -}}
