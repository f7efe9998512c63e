{{/* Chart name. */}}
{{- define "slurm.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-scoped full name. */}}
{{- define "slurm.fullname" -}}
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

{{/* Standard labels; `component` is optional. */}}
{{- define "slurm.labels" -}}
{{- $root := .root -}}
helm.sh/chart: {{ printf "%s-%s" $root.Chart.Name $root.Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "slurm.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/version: {{ $root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $root.Release.Service }}
app.kubernetes.io/part-of: sunk
sunk.coreweave.com/cluster: {{ $root.Values.clusterName }}
{{- with .component }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end -}}

{{/* The operator the rendered custom resources need (Chart.yaml's annotation): an older
operator leaves them as they are, with Ready=False OperatorTooOld. */}}
{{- define "slurm.requiresOperator" -}}
sunk.coreweave.com/requires-operator: {{ index .Chart.Annotations "sunk.coreweave.com/requires-operator" | quote }}
{{- end -}}

{{/*
An image reference from {repository, tag, digest}; global.imageRegistry is prefixed.
Usage: include "slurm.image" (dict "image" .image "global" $.Values.global)
*/}}
{{- define "slurm.image" -}}
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

{{/*
Deep merge of two maps, returned as JSON: maps merge recursively, lists and scalars
replace, null removes the key. The Python twin is sunk.models.merge.deep_merge; tests hold
both to the same results.
Usage: include "slurm.deepMerge" (dict "base" $a "over" $b) | fromJson
*/}}
{{- define "slurm.deepMerge" -}}
{{- $base := deepCopy (.base | default dict) -}}
{{- range $key, $value := (.over | default dict) -}}
{{- if kindIs "invalid" $value -}}
{{- $_ := unset $base $key -}}
{{- else if and (kindIs "map" $value) (kindIs "map" (get $base $key)) -}}
{{- $_ := set $base $key (include "slurm.deepMerge" (dict "base" (get $base $key) "over" $value) | fromJson) -}}
{{- else -}}
{{- $_ := set $base $key (deepCopy $value) -}}
{{- end -}}
{{- end -}}
{{- toJson $base -}}
{{- end -}}

{{/*
The effective settings of one node group: nodeDefaults ← definitions (in order) ← group.
Usage: include "slurm.resolveGroup" (dict "name" $name "group" $group "root" $) | fromJson
*/}}
{{- define "slurm.resolveGroup" -}}
{{- $compute := .root.Values.compute -}}
{{- $defs := $compute.definitions | default dict -}}
{{- $merged := deepCopy ($compute.nodeDefaults | default dict) -}}
{{- range $i, $def := (.group.definitions | default list) -}}
{{- if not (hasKey $defs $def) -}}
{{- fail (printf "compute.nodes.%s.definitions[%d]: unknown definition %q (known: %s)" $.name $i $def (keys $defs | sortAlpha | join ", ")) -}}
{{- end -}}
{{- $merged = include "slurm.deepMerge" (dict "base" $merged "over" (get $defs $def)) | fromJson -}}
{{- end -}}
{{- $merged = include "slurm.deepMerge" (dict "base" $merged "over" .group) | fromJson -}}
{{- $_ := unset $merged "definitions" -}}
{{- toJson $merged -}}
{{- end -}}

{{/* Names of the enabled node groups, sorted, as a JSON list. */}}
{{- define "slurm.enabledGroups" -}}
{{- $names := list -}}
{{- range $name, $group := (.Values.compute.nodes | default dict) -}}
{{- $resolved := include "slurm.resolveGroup" (dict "name" $name "group" ($group | default dict) "root" $) | fromJson -}}
{{- if ne (toString (get $resolved "enabled")) "false" -}}
{{- $names = append $names $name -}}
{{- end -}}
{{- end -}}
{{- toJson (sortAlpha $names) -}}
{{- end -}}

{{/* The lock-taint toleration every SUNK pod carries. */}}
{{- define "slurm.lockToleration" -}}
- key: sunk.coreweave.com/lock
  operator: Exists
  effect: NoExecute
{{- end -}}

{{/*
A map without its empty-map values, as YAML: for spec sections whose maps default to empty,
so removing their last entry removes the field under server-side apply (which stores an
emptied map as null, and the CRD refuses null).
*/}}
{{- define "slurm.withoutEmptyMaps" -}}
{{- $out := dict -}}
{{- range $key, $value := . -}}
{{- if not (and (kindIs "map" $value) (empty $value)) -}}
{{- $_ := set $out $key $value -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}
