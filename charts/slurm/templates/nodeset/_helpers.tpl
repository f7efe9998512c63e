{{/*
Validate one node group; fail with the values key path on input the cluster cannot run.
Usage: include "slurm.nodeset.validate" (dict "name" $name "group" $g)
*/}}
{{- define "slurm.nodeset.validate" -}}
{{- $name := .name -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" $name) -}}
{{- fail (printf "compute.nodes.%s: group name must be a DNS label (lowercase letters, digits, '-')" $name) -}}
{{- end -}}
{{- if gt (len $name) 40 -}}
{{- fail (printf "compute.nodes.%s: group name is longer than 40 characters" $name) -}}
{{- end -}}
{{- end -}}

{{/* The slurmd container's volume mounts: global, compute.mounts, the group's own. */}}
{{- define "slurm.nodeset.volumeMounts" -}}
{{- $mounts := list -}}
{{- range (.root.Values.global.volumeMounts | default list) }}{{ $mounts = append $mounts . }}{{ end -}}
{{- range $i, $m := (.root.Values.compute.mounts | default list) }}{{ $mounts = append $mounts (dict "name" (printf "mount-%d" $i) "mountPath" $m.name) }}{{ end -}}
{{- range (.group.volumeMounts | default list) }}{{ $mounts = append $mounts . }}{{ end -}}
{{- toJson $mounts -}}
{{- end -}}

{{/* The pod's volumes: global, compute.mounts (as PVCs), the group's own. */}}
{{- define "slurm.nodeset.volumes" -}}
{{- $volumes := list -}}
{{- range (.root.Values.global.volumes | default list) }}{{ $volumes = append $volumes . }}{{ end -}}
{{- range $i, $m := (.root.Values.compute.mounts | default list) }}{{ $volumes = append $volumes (dict "name" (printf "mount-%d" $i) "persistentVolumeClaim" (dict "claimName" $m.pvc)) }}{{ end -}}
{{- range (.group.volumes | default list) }}{{ $volumes = append $volumes . }}{{ end -}}
{{- toJson $volumes -}}
{{- end -}}
